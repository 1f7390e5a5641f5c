package awstest

import (
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ssoadmin/types"
)

// The endpoint's one IAM Identity Center instance and its identity store.
const (
	SSOInstanceID      = "ssoins-7223a1b2c3d4e5f6"
	SSOInstanceARN     = "arn:aws:sso:::instance/" + SSOInstanceID
	SSOIdentityStoreID = "d-9067a1b2c3"
)

// SSOAdmin is the IAM Identity Center admin endpoint (service ssoadmin, IAM
// prefix "sso"): its instance, and the assignments of users and groups to
// applications. Applications are only those added with AddApplication, or
// registered by a linked SageMaker endpoint for each SSO domain it creates
// (SageMaker.LinkSSOAdmin).
type SSOAdmin struct {
	*Core
	instanceID string
	created    time.Time
	apps       map[string]map[SSOPrincipal]bool // application ARN -> its assignments
}

// SSOPrincipal is a user or group assigned to an application.
type SSOPrincipal struct {
	Type string // USER or GROUP
	ID   string
}

// NewSSOAdmin starts an ssoadmin endpoint, closed when tb ends.
func NewSSOAdmin(tb testing.TB) *SSOAdmin {
	s := &SSOAdmin{Core: newCore(tb, "sso", true), instanceID: SSOInstanceID, created: time.Now(), apps: map[string]map[SSOPrincipal]bool{}}
	// The service's Smithy name, which the SDK sends as the X-Amz-Target prefix.
	s.serveJSON11("SWBExternalService", s.ops())
	return s
}

// Patterns and limits of the ssoadmin API model.
var (
	ssoApplicationARNPattern = regexp.MustCompile(`^arn:(aws|aws-us-gov|aws-cn|aws-iso|aws-iso-b):sso::\d{12}:application/(sso)?ins-[a-zA-Z0-9-.]{16}/apl-[a-zA-Z0-9]{16}$`)
	ssoPrincipalIDPattern    = regexp.MustCompile(`^([0-9a-f]{10}-|)[A-Fa-f0-9]{8}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{12}$`)
)

type (
	ssoAssignmentIn struct {
		ApplicationArn *string
		PrincipalId    *string
		PrincipalType  *string
	}
	ssoAssignmentOut struct {
		ApplicationArn string
		PrincipalId    string
		PrincipalType  string
	}
	ssoAssignmentListIn struct {
		ApplicationArn *string
		MaxResults     *int32
		NextToken      *string
	}
	ssoInstanceListIn struct {
		MaxResults  *int32
		NextToken   *string
		RegionScope *string
	}
)

func (s *SSOAdmin) ops() map[string]handler {
	assignment := func(do func(ssoAssignmentIn) (any, *Error)) handler {
		return func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in ssoAssignmentIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			if e := ssoCheckAssignment(in); e != nil {
				return nil, e
			}
			return do(in)
		}
	}
	return map[string]handler{
		"ListInstances": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in ssoInstanceListIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return s.listInstances(in)
		},
		"CreateApplicationAssignment":   assignment(s.createAssignment),
		"DescribeApplicationAssignment": assignment(s.describeAssignment),
		"DeleteApplicationAssignment":   assignment(s.deleteAssignment),
		"ListApplicationAssignments": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in ssoAssignmentListIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return s.listAssignments(in)
		},
	}
}

func ssoCheckApplicationARN(arn *string) *Error {
	if arn == nil {
		return Validation("ApplicationArn is required")
	}
	if len(*arn) < 10 || len(*arn) > 1224 || !ssoApplicationARNPattern.MatchString(*arn) {
		return Validation("1 validation error detected: Value '%s' at 'applicationArn' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *arn, ssoApplicationARNPattern)
	}
	return nil
}

func ssoCheckAssignment(in ssoAssignmentIn) *Error {
	if e := ssoCheckApplicationARN(in.ApplicationArn); e != nil {
		return e
	}
	switch {
	case in.PrincipalId == nil || in.PrincipalType == nil:
		return Validation("PrincipalId and PrincipalType are required")
	case len(*in.PrincipalId) < 1 || len(*in.PrincipalId) > 47 || !ssoPrincipalIDPattern.MatchString(*in.PrincipalId):
		return Validation("1 validation error detected: Value '%s' at 'principalId' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *in.PrincipalId, ssoPrincipalIDPattern)
	case !Enum(in.PrincipalType, types.PrincipalType("").Values()):
		return Validation("1 validation error detected: Value '%s' at 'principalType' failed to satisfy constraint: Member must satisfy enum value set: %v", *in.PrincipalType, types.PrincipalType("").Values())
	}
	return nil
}

// application is the assignments of a known application; the caller holds mu.
func (s *SSOAdmin) application(arn string) (map[SSOPrincipal]bool, *Error) {
	a, ok := s.apps[arn]
	if !ok {
		return nil, BadRequest("ResourceNotFoundException", "Application %s does not exist in instance %s", arn, SSOInstanceARN)
	}
	return a, nil
}

// createAssignment refuses an assignment that exists with ConflictException.
// The API reference lists ConflictException for CreateApplicationAssignment
// but does not say whether a repeated assignment gets it or succeeds; the
// stricter answer makes a caller that creates without looking first fail
// here rather than in production.
func (s *SSOAdmin) createAssignment(in ssoAssignmentIn) (any, *Error) {
	a, e := s.application(*in.ApplicationArn)
	if e != nil {
		return nil, e
	}
	p := SSOPrincipal{*in.PrincipalType, *in.PrincipalId}
	if a[p] {
		return nil, BadRequest("ConflictException", "%s %s is already assigned to application %s", p.Type, p.ID, *in.ApplicationArn)
	}
	a[p] = true
	s.event("created", "assignment")
	return map[string]any{}, nil
}

func (s *SSOAdmin) describeAssignment(in ssoAssignmentIn) (any, *Error) {
	a, e := s.application(*in.ApplicationArn)
	if e != nil {
		return nil, e
	}
	p := SSOPrincipal{*in.PrincipalType, *in.PrincipalId}
	if !a[p] {
		return nil, BadRequest("ResourceNotFoundException", "%s %s is not assigned to application %s", p.Type, p.ID, *in.ApplicationArn)
	}
	return ssoAssignmentOut{ApplicationArn: *in.ApplicationArn, PrincipalId: p.ID, PrincipalType: p.Type}, nil
}

func (s *SSOAdmin) deleteAssignment(in ssoAssignmentIn) (any, *Error) {
	a, e := s.application(*in.ApplicationArn)
	if e != nil {
		return nil, e
	}
	p := SSOPrincipal{*in.PrincipalType, *in.PrincipalId}
	if !a[p] {
		return nil, BadRequest("ResourceNotFoundException", "%s %s is not assigned to application %s", p.Type, p.ID, *in.ApplicationArn)
	}
	delete(a, p)
	s.event("deleted", "assignment")
	return map[string]any{}, nil
}

// ssoPage is the part of n items a MaxResults/NextToken pair asks for, and the
// next token ("" at the end).
func ssoPage(n int, size *int32, token *string) (start, end int, next string, e *Error) {
	max, e := maxResults(size, 100, 100)
	if e != nil {
		return 0, 0, "", e
	}
	return window(n, max, aws.ToString(token), Validation)
}

func (s *SSOAdmin) listAssignments(in ssoAssignmentListIn) (any, *Error) {
	if e := ssoCheckApplicationARN(in.ApplicationArn); e != nil {
		return nil, e
	}
	a, e := s.application(*in.ApplicationArn)
	if e != nil {
		return nil, e
	}
	all := make([]ssoAssignmentOut, 0, len(a))
	for p := range a {
		all = append(all, ssoAssignmentOut{ApplicationArn: *in.ApplicationArn, PrincipalId: p.ID, PrincipalType: p.Type})
	}
	slices.SortFunc(all, func(x, y ssoAssignmentOut) int {
		return strings.Compare(x.PrincipalType+x.PrincipalId, y.PrincipalType+y.PrincipalId)
	})
	start, end, next, e := ssoPage(len(all), in.MaxResults, in.NextToken)
	if e != nil {
		return nil, e
	}
	res := map[string]any{"ApplicationAssignments": all[start:end]}
	if next != "" {
		res["NextToken"] = next
	}
	return res, nil
}

func (s *SSOAdmin) listInstances(in ssoInstanceListIn) (any, *Error) {
	if !Enum(in.RegionScope, types.RegionScope("").Values()) {
		return nil, Validation("RegionScope %q is not valid", *in.RegionScope)
	}
	start, end, next, e := ssoPage(1, in.MaxResults, in.NextToken)
	if e != nil {
		return nil, e
	}
	all := []map[string]any{{
		"InstanceArn":      "arn:aws:sso:::instance/" + s.instanceID,
		"IdentityStoreId":  SSOIdentityStoreID,
		"IdentityStoreArn": "arn:aws:identitystore::" + Account + ":identitystore/" + SSOIdentityStoreID,
		"Name":             "portal-test",
		"OwnerAccountId":   Account,
		"PrimaryRegion":    Region,
		"Status":           string(types.InstanceStatusActive),
		"CreatedDate":      epoch(s.created),
	}}
	res := map[string]any{"Instances": all[start:end]}
	if next != "" {
		res["NextToken"] = next
	}
	return res, nil
}

// AddApplication makes the application arn known, with no assignments.
func (s *SSOAdmin) AddApplication(arn string) {
	if !ssoApplicationARNPattern.MatchString(arn) {
		s.tb.Errorf("awstest sso: AddApplication(%q): not an application ARN", arn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.apps[arn]; !ok {
		s.apps[arn] = map[SSOPrincipal]bool{}
	}
}

// removeApplication forgets the application and its assignments, as when the
// SageMaker domain that owns it is deleted.
func (s *SSOAdmin) removeApplication(arn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.apps, arn)
}

// Applications is the known application ARNs, sorted.
func (s *SSOAdmin) Applications() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.apps))
	for arn := range s.apps {
		out = append(out, arn)
	}
	slices.Sort(out)
	return out
}

// Assignments is the principals assigned to the application, as
// "<TYPE>:<id>", sorted.
func (s *SSOAdmin) Assignments(arn string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.apps[arn]))
	for p := range s.apps[arn] {
		out = append(out, fmt.Sprintf("%s:%s", p.Type, p.ID))
	}
	slices.Sort(out)
	return out
}
