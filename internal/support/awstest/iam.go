package awstest

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// IAM is an IAM endpoint speaking awsQuery (POST / with a form-encoded
// body: Action, Version=2010-05-08 and the members, lists as
// Name.member.N; answers and errors in XML), as the SDK's iam client does
// (github.com/aws/aws-sdk-go-v2/service/iam request_snapshot and
// response_snapshot of SimulatePrincipalPolicy). It serves
// SimulatePrincipalPolicy only: a test says which actions each role is
// allowed (Allow), on every resource; everything else is an implicit deny.
type IAM struct {
	*Core
	roles     map[string]map[string]bool // role ARN -> allowed actions
	simulated []string                   // every action asked about, in order
}

// NewIAM starts an IAM endpoint, closed when tb ends.
func NewIAM(tb testing.TB) *IAM {
	m := &IAM{Core: newCore(tb, "iam", false), roles: map[string]map[string]bool{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	tb.Cleanup(m.srv.Close)
	return m
}

// AddRole makes role exist, allowed actions (and nothing else).
func (m *IAM) AddRole(role string, actions ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.roles[role] == nil {
		m.roles[role] = map[string]bool{}
	}
	for _, a := range actions {
		m.roles[role][a] = true
	}
}

// RemoveRole deletes role and what it was allowed.
func (m *IAM) RemoveRole(role string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.roles, role)
}

// Simulated is every action a simulation asked about, in order.
func (m *IAM) Simulated() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.simulated)
}

// iamRoleARN is an IAM role's ARN; SimulatePrincipalPolicy also takes users
// and groups, which the portal never simulates.
var (
	iamPrincipalARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user|group)/([\w+=,.@-]+/)*[\w+=,.@-]+$`)
	iamActionName   = regexp.MustCompile(`^[a-z0-9-]+:[A-Za-z0-9*]+$`)
)

type iamEvalResult struct {
	EvalActionName   string `xml:"EvalActionName"`
	EvalResourceName string `xml:"EvalResourceName"`
	EvalDecision     string `xml:"EvalDecision"`
}

type iamSimulateResponse struct {
	XMLName xml.Name `xml:"SimulatePrincipalPolicyResponse"`
	Result  struct {
		EvaluationResults []iamEvalResult `xml:"EvaluationResults>member"`
		IsTruncated       bool            `xml:"IsTruncated"`
		Marker            string          `xml:"Marker,omitempty"`
	} `xml:"SimulatePrincipalPolicyResult"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

type iamErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

func (m *IAM) serve(w http.ResponseWriter, r *http.Request) {
	op := "?"
	res, aerr := func() (any, *Error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/" {
			return nil, Errorf(http.StatusBadRequest, "InvalidAction", "%s %s", r.Method, r.URL.Path)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
			return nil, Errorf(http.StatusBadRequest, "MalformedInput", "Content-Type %q", ct)
		}
		body, e := readBody(r)
		if e != nil {
			return nil, e
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, Errorf(http.StatusBadRequest, "MalformedInput", "%v", err)
		}
		op = form.Get("Action")
		if e := m.admit(op, r); e != nil {
			if e.Code == "AccessDeniedException" {
				e.Code = "AccessDenied" // awsQuery's code
			}
			return nil, e
		}
		switch {
		case form.Get("Version") != "2010-05-08":
			return nil, Errorf(http.StatusBadRequest, "InvalidParameterValue", "Version %q is not 2010-05-08", form.Get("Version"))
		case op != "SimulatePrincipalPolicy":
			return nil, Errorf(http.StatusBadRequest, "InvalidAction", "operation %q is not served by this test endpoint", op)
		}
		return m.simulate(form)
	}()
	m.finish(op, aerr)
	w.Header().Set("Content-Type", "text/xml")
	if aerr != nil {
		var er iamErrorResponse
		er.Error.Type, er.Error.Code, er.Error.Message = "Sender", aerr.Code, aerr.Message
		if aerr.Status >= 500 {
			er.Error.Type = "Receiver"
		}
		er.RequestID = "portal-test"
		replyXML(w, aerr.Status, er)
		return
	}
	replyXML(w, http.StatusOK, res)
}

// members reads the awsQuery list name.member.1..N, refusing any other
// key under name and gaps in the numbering.
func members(form url.Values, name string) ([]string, *Error) {
	byN := map[int]string{}
	for k, v := range form {
		if !strings.HasPrefix(k, name+".") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(k, name+".member."))
		if err != nil || n < 1 || !strings.HasPrefix(k, name+".member.") {
			return nil, Errorf(http.StatusBadRequest, "MalformedInput", "unknown parameter %s", k)
		}
		byN[n] = v[0]
	}
	out := make([]string, len(byN))
	for n, v := range byN {
		if n > len(byN) {
			return nil, Errorf(http.StatusBadRequest, "MalformedInput", "%s: member %d follows a gap", name, n)
		}
		out[n-1] = v
	}
	return out, nil
}

// simulate is SimulatePrincipalPolicy: every action on every resource
// ("*" when none is given), in pages of MaxItems (default 100, 1-1000)
// with Marker.
func (m *IAM) simulate(form url.Values) (any, *Error) {
	invalid := func(format string, args ...any) *Error {
		return Errorf(http.StatusBadRequest, "InvalidInput", format, args...)
	}
	for k := range form {
		switch {
		case k == "Action", k == "Version", k == "PolicySourceArn", k == "MaxItems", k == "Marker",
			strings.HasPrefix(k, "ActionNames."), strings.HasPrefix(k, "ResourceArns."):
		default:
			// The portal sends no policies, context or caller: a member it
			// does not mean to send is a defect here.
			return nil, invalid("parameter %s is not served by this test endpoint", k)
		}
	}
	src := form.Get("PolicySourceArn")
	switch {
	case src == "":
		return nil, invalid("1 validation error detected: Value null at 'policySourceArn' failed to satisfy constraint: Member must not be null")
	case len(src) < 20 || len(src) > 2048 || !iamPrincipalARN.MatchString(src):
		return nil, invalid("PolicySourceArn %q is not the ARN of a user, group or role", src)
	}
	actions, e := members(form, "ActionNames")
	if e != nil {
		return nil, e
	}
	if len(actions) == 0 {
		return nil, invalid("1 validation error detected: Value null at 'actionNames' failed to satisfy constraint: Member must not be null")
	}
	for _, a := range actions {
		if len(a) < 3 || len(a) > 128 || !iamActionName.MatchString(a) {
			return nil, invalid("ActionNames: %q is not an action such as iam:CreateUser", a)
		}
	}
	resources, e := members(form, "ResourceArns")
	if e != nil {
		return nil, e
	}
	for _, res := range resources {
		if len(res) < 1 || len(res) > 2048 || (res != "*" && !strings.HasPrefix(res, "arn:")) {
			return nil, invalid("ResourceArns: %q is not an ARN", res)
		}
	}
	if len(resources) == 0 {
		resources = []string{"*"}
	}
	max := 100
	if v := form.Get("MaxItems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, invalid("MaxItems %q is not 1-1000", v)
		}
		max = n
	}
	role, ok := m.roles[src]
	if !ok {
		return nil, Errorf(http.StatusNotFound, "NoSuchEntity", "The role with name %s cannot be found.", src[strings.LastIndex(src, "/")+1:])
	}
	m.simulated = append(m.simulated, actions...)
	var all []iamEvalResult
	for _, a := range actions {
		for _, res := range resources {
			d := "implicitDeny"
			if role[a] {
				d = "allowed"
			}
			all = append(all, iamEvalResult{EvalActionName: a, EvalResourceName: res, EvalDecision: d})
		}
	}
	start, end, next, e := window(len(all), max, form.Get("Marker"), func(format string, args ...any) *Error {
		return invalid("Marker: "+format, args...)
	})
	if e != nil {
		return nil, e
	}
	var out iamSimulateResponse
	out.Result.EvaluationResults = slices.Clone(all[start:end])
	out.Result.IsTruncated, out.Result.Marker = next != "", next
	out.RequestID = "portal-test"
	return out, nil
}

// replyXML writes v as an awsQuery answer, with its Content-Length.
func replyXML(w http.ResponseWriter, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>test endpoint could not encode its answer</Message></Error></ErrorResponse>`)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
