package awsprov

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// fakeSageMaker is a strict, stateful SageMaker endpoint for the compute
// quota operations, speaking awsJson1_1 as the real service does: POST /,
// X-Amz-Target: SageMaker.<Operation>, JSON bodies in and out, errors as
// HTTP 400 (or 5xx) with {"__type": code, "message": ...}.
type fakeSageMaker struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	quotas map[string]*fakeQuota // by id
	nextID int
	calls  map[string]int // by operation, including rejected calls

	// settleAfter is how many Describes a quota stays Creating / Updating.
	settleAfter int
	// throttleNext throttles the next n calls of any operation.
	throttleNext int
	// failNext answers the next n calls with HTTP 500 InternalFailure.
	failNext int
	// loseCreateResponses makes the next n successful creates answer HTTP 500
	// after storing the quota, as when a response is lost on the way back.
	loseCreateResponses int
	// createFailure, when set, makes new quotas end in CreateFailed with it
	// as the FailureReason.
	createFailure string
}

type fakeQuota struct {
	ID, ARN, Name, ClusterArn string
	Config                    *configIn
	Target                    *targetIn
	Activation                string
	Tags                      []fakeTag
	Version                   int32
	Status                    string
	Pending                   int    // describes left before settling
	Final                     string // status after settling
	FailureReason             string
	Created, Modified         time.Time
}

// Request and response shapes, with the service's member names. Pointers
// tell a missing member from a zero one.
type (
	fakeTag struct {
		Key   *string `json:"Key"`
		Value *string `json:"Value"`
	}
	configIn struct {
		ComputeQuotaResources []resourceIn `json:",omitempty"`
		ResourceSharingConfig *sharingIn   `json:",omitempty"`
		PreemptTeamTasks      *string      `json:",omitempty"`
	}
	resourceIn struct {
		InstanceType         *string         `json:",omitempty"`
		Count                *int32          `json:",omitempty"`
		Accelerators         *int32          `json:",omitempty"`
		VCpu                 *float32        `json:",omitempty"`
		MemoryInGiB          *float32        `json:",omitempty"`
		AcceleratorPartition json.RawMessage `json:",omitempty"`
	}
	sharingIn struct {
		Strategy             *string      `json:",omitempty"`
		BorrowLimit          *int32       `json:",omitempty"`
		AbsoluteBorrowLimits []resourceIn `json:",omitempty"`
	}
	targetIn struct {
		TeamName        *string `json:",omitempty"`
		FairShareWeight *int32  `json:",omitempty"`
	}
	createIn struct {
		Name               *string
		ClusterArn         *string
		ComputeQuotaConfig *configIn
		ComputeQuotaTarget *targetIn
		ActivationState    *string
		Description        *string
		Tags               []fakeTag
	}
	describeIn struct {
		ComputeQuotaId      *string
		ComputeQuotaVersion *int32
	}
	updateIn struct {
		ComputeQuotaId     *string
		TargetVersion      *int32
		ComputeQuotaConfig *configIn
		ComputeQuotaTarget *targetIn
		ActivationState    *string
		Description        *string
	}
	listIn struct {
		ClusterArn    *string
		CreatedAfter  *float64
		CreatedBefore *float64
		MaxResults    *int32
		NameContains  *string
		NextToken     *string
		SortBy        *string
		SortOrder     *string
		Status        *string
	}
	deleteIn struct {
		ComputeQuotaId *string
	}
	quotaOut struct {
		ComputeQuotaArn     string
		ComputeQuotaId      string
		Name                string
		ComputeQuotaVersion int32
		Status              string
		FailureReason       string `json:",omitempty"`
		ClusterArn          string
		ComputeQuotaConfig  *configIn
		ComputeQuotaTarget  *targetIn
		ActivationState     string
		CreationTime        float64
		LastModifiedTime    float64
	}
)

func newFakeSageMaker(t *testing.T) *fakeSageMaker {
	f := &fakeSageMaker{t: t, quotas: map[string]*fakeQuota{}, calls: map[string]int{}, settleAfter: 2}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// client is a real SageMaker client pointed at the endpoint. maxAttempts is
// the SDK's attempts per call (1: no SDK retries); backoff is zero so that
// retry tests run instantly, but the standard retryer otherwise decides what
// is retried (throttling and 5xx are, ConflictException and
// ValidationException are not).
func (f *fakeSageMaker) client(maxAttempts int) *sagemaker.Client {
	return sagemaker.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	}, func(o *sagemaker.Options) {
		o.BaseEndpoint = aws.String(f.srv.URL)
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = maxAttempts
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			so.RateLimiter = ratelimit.None
		})
	})
}

func (f *fakeSageMaker) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeSageMaker) set(fn func(*fakeSageMaker)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// apiError is an error response of the service.
type apiError struct {
	status int
	code   string
	msg    string
}

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, code, fmt.Sprintf(format, args...)}
}

func validation(format string, args ...any) *apiError {
	return badRequest("ValidationException", format, args...)
}

var (
	clusterARNPattern = regexp.MustCompile(`^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}$`)
	quotaNamePattern  = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	teamNamePattern   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9]){0,62}$`)
	quotaIDPattern    = regexp.MustCompile(`^[a-z0-9]{12}$`)
)

func (f *fakeSageMaker) serve(w http.ResponseWriter, r *http.Request) {
	op, res, aerr := f.handle(r)
	if aerr != nil {
		f.t.Logf("fake sagemaker: %s -> %d %s: %s", op, aerr.status, aerr.code, aerr.msg)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(aerr.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": aerr.code, "message": aerr.msg})
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(res)
}

func (f *fakeSageMaker) handle(r *http.Request) (string, any, *apiError) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "SageMaker.")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/":
		return op, nil, badRequest("UnknownOperationException", "%s %s", r.Method, r.URL.Path)
	case !ok:
		return op, nil, badRequest("UnknownOperationException", "X-Amz-Target %q", target)
	case r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
		return op, nil, badRequest("SerializationException", "Content-Type %q", r.Header.Get("Content-Type"))
	case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKID/"):
		return op, nil, badRequest("MissingAuthenticationToken", "request is not signed")
	}
	if f.throttleNext > 0 {
		f.throttleNext--
		return op, nil, badRequest("ThrottlingException", "Rate exceeded")
	}
	if f.failNext > 0 {
		f.failNext--
		return op, nil, &apiError{http.StatusInternalServerError, "InternalFailure", "internal failure"}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return op, nil, badRequest("SerializationException", "%v", err)
	}
	decode := func(v any) *apiError {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return badRequest("SerializationException", "%s: %v", op, err)
		}
		return nil
	}
	switch op {
	case "CreateComputeQuota":
		var in createIn
		if e := decode(&in); e != nil {
			return op, nil, e
		}
		res, e := f.create(in)
		return op, res, e
	case "DescribeComputeQuota":
		var in describeIn
		if e := decode(&in); e != nil {
			return op, nil, e
		}
		res, e := f.describe(in)
		return op, res, e
	case "UpdateComputeQuota":
		var in updateIn
		if e := decode(&in); e != nil {
			return op, nil, e
		}
		res, e := f.update(in)
		return op, res, e
	case "ListComputeQuotas":
		var in listIn
		if e := decode(&in); e != nil {
			return op, nil, e
		}
		res, e := f.list(in)
		return op, res, e
	case "DeleteComputeQuota":
		var in deleteIn
		if e := decode(&in); e != nil {
			return op, nil, e
		}
		res, e := f.delete(in)
		return op, res, e
	}
	return op, nil, badRequest("UnknownOperationException", "operation %q is not served here", op)
}

func enum[T ~string](v *string, values []T) bool {
	return v == nil || slices.Contains(values, T(*v))
}

func (f *fakeSageMaker) checkConfig(c *configIn) *apiError {
	seen := map[string]bool{}
	for i, r := range c.ComputeQuotaResources {
		if r.InstanceType == nil {
			return validation("ComputeQuotaResources[%d].InstanceType is required", i)
		}
		if !enum(r.InstanceType, types.ClusterInstanceType("").Values()) {
			return validation("Value '%s' at 'computeQuotaConfig.computeQuotaResources.%d.member.instanceType' failed to satisfy constraint: Member must satisfy enum value set", *r.InstanceType, i+1)
		}
		if seen[*r.InstanceType] {
			return validation("instance type %s appears twice", *r.InstanceType)
		}
		seen[*r.InstanceType] = true
		if r.Count != nil && (*r.Count < 0 || *r.Count > 10000) {
			return validation("Count %d is out of range", *r.Count)
		}
	}
	if s := c.ResourceSharingConfig; s != nil {
		if s.Strategy == nil {
			return validation("ResourceSharingConfig.Strategy is required")
		}
		if !enum(s.Strategy, types.ResourceSharingStrategy("").Values()) {
			return validation("Strategy %q is not one of %v", *s.Strategy, types.ResourceSharingStrategy("").Values())
		}
		if s.BorrowLimit != nil && (*s.BorrowLimit < 1 || *s.BorrowLimit > 500) {
			return validation("BorrowLimit %d is not in 1-500", *s.BorrowLimit)
		}
	}
	if !enum(c.PreemptTeamTasks, types.PreemptTeamTasks("").Values()) {
		return validation("PreemptTeamTasks %q is not valid", *c.PreemptTeamTasks)
	}
	return nil
}

// withDefaults fills what the service fills when a member is absent, so that
// Describe returns it as the service would.
func (c *configIn) withDefaults() *configIn {
	out := *c
	if out.PreemptTeamTasks == nil {
		out.PreemptTeamTasks = aws.String(string(types.PreemptTeamTasksLowerpriority))
	}
	s := sharingIn{Strategy: aws.String(string(types.ResourceSharingStrategyLendandborrow))}
	if out.ResourceSharingConfig != nil {
		s = *out.ResourceSharingConfig
	}
	if *s.Strategy == string(types.ResourceSharingStrategyLendandborrow) && s.BorrowLimit == nil {
		s.BorrowLimit = aws.Int32(50)
	}
	out.ResourceSharingConfig = &s
	return &out
}

func checkTarget(t *targetIn) *apiError {
	if t.TeamName == nil {
		return validation("ComputeQuotaTarget.TeamName is required")
	}
	if !teamNamePattern.MatchString(*t.TeamName) || len(*t.TeamName) > 63 {
		return validation("TeamName %q does not match %s", *t.TeamName, teamNamePattern)
	}
	if t.FairShareWeight != nil && (*t.FairShareWeight < 0 || *t.FairShareWeight > 100) {
		return validation("FairShareWeight %d is not in 0-100", *t.FairShareWeight)
	}
	return nil
}

func (f *fakeSageMaker) create(in createIn) (any, *apiError) {
	switch {
	case in.Name == nil || in.ClusterArn == nil || in.ComputeQuotaConfig == nil || in.ComputeQuotaTarget == nil:
		return nil, validation("Name, ClusterArn, ComputeQuotaConfig and ComputeQuotaTarget are required")
	case !quotaNamePattern.MatchString(*in.Name):
		return nil, validation("Name %q does not match %s", *in.Name, quotaNamePattern)
	case !clusterARNPattern.MatchString(*in.ClusterArn):
		return nil, validation("ClusterArn %q does not match %s", *in.ClusterArn, clusterARNPattern)
	case !enum(in.ActivationState, types.ActivationState("").Values()):
		return nil, validation("ActivationState %q is not valid", *in.ActivationState)
	}
	if e := f.checkConfig(in.ComputeQuotaConfig); e != nil {
		return nil, e
	}
	if e := checkTarget(in.ComputeQuotaTarget); e != nil {
		return nil, e
	}
	for _, tag := range in.Tags {
		if tag.Key == nil || tag.Value == nil || *tag.Key == "" || strings.HasPrefix(*tag.Key, "aws:") {
			return nil, validation("tags need a Key (not aws:) and a Value")
		}
	}
	for _, q := range f.quotas {
		if q.ClusterArn != *in.ClusterArn {
			continue
		}
		if q.Name == *in.Name {
			return nil, badRequest("ConflictException", "compute quota %s already exists in the cluster", q.Name)
		}
		if *q.Target.TeamName == *in.ComputeQuotaTarget.TeamName {
			return nil, badRequest("ConflictException", "team %s already has a compute quota in the cluster", *q.Target.TeamName)
		}
	}
	f.nextID++
	id := fmt.Sprintf("q%011d", f.nextID)
	now := time.Now()
	q := &fakeQuota{
		ID: id, ARN: "arn:aws:sagemaker:us-east-1:123456789012:compute-quota/" + id,
		Name: *in.Name, ClusterArn: *in.ClusterArn,
		Config: in.ComputeQuotaConfig.withDefaults(), Target: in.ComputeQuotaTarget,
		Activation: aws.ToString(in.ActivationState), Tags: in.Tags,
		Version: 1, Status: "Creating", Pending: f.settleAfter, Final: "Created",
		Created: now, Modified: now,
	}
	if q.Activation == "" {
		q.Activation = string(types.ActivationStateEnabled)
	}
	if f.createFailure != "" {
		q.Final, q.FailureReason = "CreateFailed", f.createFailure
	}
	f.quotas[id] = q
	f.calls["created"]++
	if f.loseCreateResponses > 0 {
		f.loseCreateResponses--
		return nil, &apiError{http.StatusInternalServerError, "InternalFailure", "internal failure"}
	}
	return map[string]string{"ComputeQuotaArn": q.ARN, "ComputeQuotaId": id}, nil
}

func (f *fakeSageMaker) lookup(id *string) (*fakeQuota, *apiError) {
	if id == nil || !quotaIDPattern.MatchString(*id) {
		return nil, validation("ComputeQuotaId is required and must match %s", quotaIDPattern)
	}
	q, ok := f.quotas[*id]
	if !ok {
		return nil, badRequest("ResourceNotFound", "compute quota %s does not exist", *id)
	}
	return q, nil
}

func (q *fakeQuota) out() quotaOut {
	return quotaOut{
		ComputeQuotaArn: q.ARN, ComputeQuotaId: q.ID, Name: q.Name, ComputeQuotaVersion: q.Version,
		Status: q.Status, FailureReason: q.FailureReason, ClusterArn: q.ClusterArn,
		ComputeQuotaConfig: q.Config, ComputeQuotaTarget: q.Target, ActivationState: q.Activation,
		CreationTime:     float64(q.Created.UnixMilli()) / 1000,
		LastModifiedTime: float64(q.Modified.UnixMilli()) / 1000,
	}
}

func (f *fakeSageMaker) describe(in describeIn) (any, *apiError) {
	q, e := f.lookup(in.ComputeQuotaId)
	if e != nil {
		return nil, e
	}
	if in.ComputeQuotaVersion != nil && *in.ComputeQuotaVersion != q.Version {
		return nil, badRequest("ResourceNotFound", "compute quota %s has no version %d", q.ID, *in.ComputeQuotaVersion)
	}
	if q.Pending > 0 {
		q.Pending--
	}
	if q.Pending == 0 {
		q.Status = q.Final
	}
	o := q.out()
	if q.Status != "CreateFailed" && q.Status != "UpdateFailed" {
		o.FailureReason = ""
	}
	return o, nil
}

func (f *fakeSageMaker) update(in updateIn) (any, *apiError) {
	q, e := f.lookup(in.ComputeQuotaId)
	if e != nil {
		return nil, e
	}
	if in.TargetVersion == nil {
		return nil, validation("TargetVersion is required")
	}
	if !slices.Contains([]string{"Created", "Updated", "UpdateFailed"}, q.Status) {
		return nil, badRequest("ConflictException", "compute quota %s is %s", q.ID, q.Status)
	}
	if *in.TargetVersion != q.Version {
		return nil, badRequest("ConflictException", "TargetVersion %d is not the current version %d", *in.TargetVersion, q.Version)
	}
	if !enum(in.ActivationState, types.ActivationState("").Values()) {
		return nil, validation("ActivationState %q is not valid", *in.ActivationState)
	}
	if in.ComputeQuotaConfig != nil {
		if e := f.checkConfig(in.ComputeQuotaConfig); e != nil {
			return nil, e
		}
		q.Config = in.ComputeQuotaConfig.withDefaults()
	}
	if in.ComputeQuotaTarget != nil {
		if e := checkTarget(in.ComputeQuotaTarget); e != nil {
			return nil, e
		}
		q.Target = in.ComputeQuotaTarget
	}
	if in.ActivationState != nil {
		q.Activation = *in.ActivationState
	}
	q.Version++
	q.Status, q.Pending, q.Final, q.FailureReason = "Updating", f.settleAfter, "Updated", ""
	q.Modified = time.Now()
	f.calls["updated"]++
	return map[string]any{"ComputeQuotaArn": q.ARN, "ComputeQuotaVersion": q.Version}, nil
}

func (f *fakeSageMaker) list(in listIn) (any, *apiError) {
	max := 10
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return nil, validation("MaxResults %d is not in 1-100", *in.MaxResults)
		}
		max = int(*in.MaxResults)
	}
	if in.ClusterArn != nil && !clusterARNPattern.MatchString(*in.ClusterArn) {
		return nil, validation("ClusterArn %q does not match %s", *in.ClusterArn, clusterARNPattern)
	}
	if !enum(in.Status, types.SchedulerResourceStatus("").Values()) {
		return nil, validation("Status %q is not valid", *in.Status)
	}
	var all []quotaOut
	for _, q := range f.quotas {
		if in.ClusterArn != nil && q.ClusterArn != *in.ClusterArn ||
			in.NameContains != nil && !strings.Contains(q.Name, *in.NameContains) ||
			in.Status != nil && q.Status != *in.Status {
			continue
		}
		all = append(all, q.out())
	}
	slices.SortFunc(all, func(a, b quotaOut) int { return strings.Compare(a.ComputeQuotaId, b.ComputeQuotaId) })
	start := 0
	if in.NextToken != nil {
		n, err := strconv.Atoi(*in.NextToken)
		if err != nil || n < 0 || n > len(all) {
			return nil, validation("NextToken %q is not valid", *in.NextToken)
		}
		start = n
	}
	end := min(start+max, len(all))
	res := map[string]any{"ComputeQuotaSummaries": all[start:end]}
	for i := range all[start:end] {
		all[start+i].FailureReason = "" // not a member of ComputeQuotaSummary
	}
	if end < len(all) {
		res["NextToken"] = strconv.Itoa(end)
	}
	return res, nil
}

func (f *fakeSageMaker) delete(in deleteIn) (any, *apiError) {
	q, e := f.lookup(in.ComputeQuotaId)
	if e != nil {
		return nil, e
	}
	delete(f.quotas, q.ID)
	f.calls["deleted"]++
	return map[string]any{}, nil
}

// quota is a copy of the stored quota id (zero when there is none).
func (f *fakeSageMaker) quota(id string) fakeQuota {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q, ok := f.quotas[id]; ok {
		return *q
	}
	return fakeQuota{}
}

// stored is how many quotas exist.
func (f *fakeSageMaker) stored() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.quotas)
}
