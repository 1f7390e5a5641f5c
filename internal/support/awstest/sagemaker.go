package awstest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// SageMaker is the SageMaker endpoint: HyperPod task governance compute
// quotas (and, in sagemaker_domain.go, domains). Fields below are settings a
// test changes with Set.
type SageMaker struct {
	*Core
	quotas map[string]*Quota // by id
	nextID int
	dom    *smDomains    // sagemaker_domain.go
	sched  *smSchedulers // sagemaker_scheduler.go
	// hpClusters are the HyperPod clusters DescribeCluster knows, by name
	// (sagemaker_cluster.go).
	hpClusters map[string]*HyperPodCluster
	// targets are the TargetVersions of the UpdateComputeQuota calls
	// accepted, in order.
	targets []int32

	// SettleAfter is how many Describes a quota stays Creating / Updating,
	// and how many Describes or Lists a deleted quota stays Deleting.
	SettleAfter int
	// DeletedLinger is how many Describes or Lists a deleted quota is still
	// answered, with status Deleted, before it is gone: the service lists
	// deleted quotas for a while (SchedulerResourceStatus has Deleted).
	DeletedLinger int
	// LoseCreateResponses makes the next n successful creates answer HTTP 500
	// after storing the resource, as when a response is lost on the way back.
	LoseCreateResponses int
	// CreateFailure, when set, makes new quotas end in CreateFailed with it
	// as the FailureReason.
	CreateFailure string
	// DomainFailure, when set, makes new domains end in Failed with it as
	// the FailureReason.
	DomainFailure string
	// OnQuotaCreated, when set, is called (under the endpoint's lock) with
	// the team and cluster ARN of a quota the moment it settles as Created:
	// where a test stands in for HyperPod task governance, which then
	// creates the team's namespace and LocalQueue on the cluster.
	OnQuotaCreated func(team, clusterARN string)
	// DomainUserProfiles, when set, is how many user profiles every domain
	// has (SSO users get one at their first sign-in): DeleteDomain is then
	// refused with ResourceInUse, as the service does.
	DomainUserProfiles int
}

// NewSageMaker starts a SageMaker endpoint, closed when tb ends.
func NewSageMaker(tb testing.TB) *SageMaker {
	f := &SageMaker{Core: newCore(tb, "sagemaker", true), quotas: map[string]*Quota{}, SettleAfter: 2, DeletedLinger: 2}
	f.serveJSON11("SageMaker", f.ops())
	return f
}

// Set changes settings under the endpoint's lock.
func (f *SageMaker) Set(fn func(*SageMaker)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *SageMaker) ops() map[string]handler {
	ops := f.domainOps()
	maps.Copy(ops, f.schedulerOps())
	maps.Copy(ops, f.tagOps())
	maps.Copy(ops, f.clusterOps())
	for op, h := range f.quotaOps() {
		ops[op] = h
	}
	return ops
}

func (f *SageMaker) quotaOps() map[string]handler {
	return map[string]handler{
		"CreateComputeQuota": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in quotaCreateIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.create(in)
		},
		"DescribeComputeQuota": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in quotaDescribeIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.describe(in)
		},
		"UpdateComputeQuota": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in quotaUpdateIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.update(in)
		},
		"ListComputeQuotas": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in quotaListIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.list(in)
		},
		"DeleteComputeQuota": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in quotaDeleteIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.delete(in)
		},
	}
}

// Quota is a stored compute quota.
type Quota struct {
	ID, ARN, Name, ClusterArn string
	Config                    *quotaConfig
	Target                    *quotaTarget
	Activation                string
	Tags                      []Tag
	Version                   int32
	Status                    string
	Pending                   int    // describes left before settling
	Final                     string // status after settling
	Linger                    int    // Deleted: describes or lists left before it is gone
	FailureReason             string
	Created, Modified         time.Time
}

// Request and response shapes, with the service's member names. Pointers
// tell a missing member from a zero one.
type (
	Tag struct {
		Key   *string `json:"Key"`
		Value *string `json:"Value"`
	}
	quotaConfig struct {
		ComputeQuotaResources []quotaResource `json:",omitempty"`
		ResourceSharingConfig *quotaSharing   `json:",omitempty"`
		PreemptTeamTasks      *string         `json:",omitempty"`
	}
	quotaResource struct {
		InstanceType         *string         `json:",omitempty"`
		Count                *int32          `json:",omitempty"`
		Accelerators         *int32          `json:",omitempty"`
		VCpu                 *float32        `json:",omitempty"`
		MemoryInGiB          *float32        `json:",omitempty"`
		AcceleratorPartition json.RawMessage `json:",omitempty"`
	}
	quotaSharing struct {
		Strategy             *string         `json:",omitempty"`
		BorrowLimit          *int32          `json:",omitempty"`
		AbsoluteBorrowLimits []quotaResource `json:",omitempty"`
	}
	quotaTarget struct {
		TeamName        *string `json:",omitempty"`
		FairShareWeight *int32  `json:",omitempty"`
	}
	quotaCreateIn struct {
		Name               *string
		ClusterArn         *string
		ComputeQuotaConfig *quotaConfig
		ComputeQuotaTarget *quotaTarget
		ActivationState    *string
		Description        *string
		Tags               []Tag
	}
	quotaDescribeIn struct {
		ComputeQuotaId      *string
		ComputeQuotaVersion *int32
	}
	quotaUpdateIn struct {
		ComputeQuotaId     *string
		TargetVersion      *int32
		ComputeQuotaConfig *quotaConfig
		ComputeQuotaTarget *quotaTarget
		ActivationState    *string
		Description        *string
	}
	quotaListIn struct {
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
	quotaDeleteIn struct {
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
		ComputeQuotaConfig  *quotaConfig
		ComputeQuotaTarget  *quotaTarget
		ActivationState     string
		CreationTime        float64
		LastModifiedTime    float64
	}
)

var (
	clusterARNPattern = regexp.MustCompile(`^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}$`)
	quotaNamePattern  = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	teamNamePattern   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9]){0,62}$`)
	quotaIDPattern    = regexp.MustCompile(`^[a-z0-9]{12}$`)
)

func (f *SageMaker) checkConfig(c *quotaConfig) *Error {
	seen := map[string]bool{}
	for i, r := range c.ComputeQuotaResources {
		if r.InstanceType == nil {
			return Validation("ComputeQuotaResources[%d].InstanceType is required", i)
		}
		if !Enum(r.InstanceType, types.ClusterInstanceType("").Values()) {
			return Validation("Value '%s' at 'computeQuotaConfig.computeQuotaResources.%d.member.instanceType' failed to satisfy constraint: Member must satisfy enum value set", *r.InstanceType, i+1)
		}
		if seen[*r.InstanceType] {
			return Validation("instance type %s appears twice", *r.InstanceType)
		}
		seen[*r.InstanceType] = true
		if r.Count != nil && (*r.Count < 0 || *r.Count > 10000) {
			return Validation("Count %d is out of range", *r.Count)
		}
	}
	if s := c.ResourceSharingConfig; s != nil {
		if s.Strategy == nil {
			return Validation("ResourceSharingConfig.Strategy is required")
		}
		if !Enum(s.Strategy, types.ResourceSharingStrategy("").Values()) {
			return Validation("Strategy %q is not one of %v", *s.Strategy, types.ResourceSharingStrategy("").Values())
		}
		if s.BorrowLimit != nil && (*s.BorrowLimit < 1 || *s.BorrowLimit > 500) {
			return Validation("BorrowLimit %d is not in 1-500", *s.BorrowLimit)
		}
	}
	if !Enum(c.PreemptTeamTasks, types.PreemptTeamTasks("").Values()) {
		return Validation("PreemptTeamTasks %q is not valid", *c.PreemptTeamTasks)
	}
	return nil
}

// withDefaults fills what the service fills when a member is absent, so that
// Describe returns it as the service would.
func (c *quotaConfig) withDefaults() *quotaConfig {
	out := *c
	if out.PreemptTeamTasks == nil {
		out.PreemptTeamTasks = aws.String(string(types.PreemptTeamTasksLowerpriority))
	}
	s := quotaSharing{Strategy: aws.String(string(types.ResourceSharingStrategyLendandborrow))}
	if out.ResourceSharingConfig != nil {
		s = *out.ResourceSharingConfig
	}
	if *s.Strategy == string(types.ResourceSharingStrategyLendandborrow) && s.BorrowLimit == nil {
		s.BorrowLimit = aws.Int32(50)
	}
	out.ResourceSharingConfig = &s
	return &out
}

func checkTarget(t *quotaTarget) *Error {
	if t.TeamName == nil {
		return Validation("ComputeQuotaTarget.TeamName is required")
	}
	if !teamNamePattern.MatchString(*t.TeamName) || len(*t.TeamName) > 63 {
		return Validation("TeamName %q does not match %s", *t.TeamName, teamNamePattern)
	}
	if t.FairShareWeight != nil && (*t.FairShareWeight < 0 || *t.FairShareWeight > 100) {
		return Validation("FairShareWeight %d is not in 0-100", *t.FairShareWeight)
	}
	return nil
}

func (f *SageMaker) create(in quotaCreateIn) (any, *Error) {
	switch {
	case in.Name == nil || in.ClusterArn == nil || in.ComputeQuotaConfig == nil || in.ComputeQuotaTarget == nil:
		return nil, Validation("Name, ClusterArn, ComputeQuotaConfig and ComputeQuotaTarget are required")
	case !quotaNamePattern.MatchString(*in.Name):
		return nil, Validation("Name %q does not match %s", *in.Name, quotaNamePattern)
	case !clusterARNPattern.MatchString(*in.ClusterArn):
		return nil, Validation("ClusterArn %q does not match %s", *in.ClusterArn, clusterARNPattern)
	case !Enum(in.ActivationState, types.ActivationState("").Values()):
		return nil, Validation("ActivationState %q is not valid", *in.ActivationState)
	}
	if e := f.checkConfig(in.ComputeQuotaConfig); e != nil {
		return nil, e
	}
	if e := checkTarget(in.ComputeQuotaTarget); e != nil {
		return nil, e
	}
	for _, tag := range in.Tags {
		if tag.Key == nil || tag.Value == nil || *tag.Key == "" || strings.HasPrefix(*tag.Key, "aws:") {
			return nil, Validation("tags need a Key (not aws:) and a Value")
		}
	}
	for _, q := range f.quotas {
		if q.ClusterArn != *in.ClusterArn || q.Status == "Deleted" {
			continue
		}
		if q.Name == *in.Name {
			return nil, BadRequest("ConflictException", "compute quota %s already exists in the cluster", q.Name)
		}
		if *q.Target.TeamName == *in.ComputeQuotaTarget.TeamName {
			return nil, BadRequest("ConflictException", "team %s already has a compute quota in the cluster", *q.Target.TeamName)
		}
	}
	f.nextID++
	id := fmt.Sprintf("q%011d", f.nextID)
	now := time.Now()
	q := &Quota{
		ID: id, ARN: "arn:aws:sagemaker:" + Region + ":" + Account + ":compute-quota/" + id,
		Name: *in.Name, ClusterArn: *in.ClusterArn,
		Config: in.ComputeQuotaConfig.withDefaults(), Target: in.ComputeQuotaTarget,
		Activation: aws.ToString(in.ActivationState), Tags: in.Tags,
		Version: 1, Status: "Creating", Pending: f.SettleAfter, Final: "Created",
		Created: now, Modified: now,
	}
	if q.Activation == "" {
		q.Activation = string(types.ActivationStateEnabled)
	}
	if f.CreateFailure != "" {
		q.Final, q.FailureReason = "CreateFailed", f.CreateFailure
	}
	f.quotas[id] = q
	f.event("created", "compute-quota")
	if f.LoseCreateResponses > 0 {
		f.LoseCreateResponses--
		return nil, Errorf(http.StatusInternalServerError, "InternalFailure", "internal failure")
	}
	return map[string]string{"ComputeQuotaArn": q.ARN, "ComputeQuotaId": id}, nil
}

func (f *SageMaker) lookup(id *string) (*Quota, *Error) {
	if id == nil || !quotaIDPattern.MatchString(*id) {
		return nil, Validation("ComputeQuotaId is required and must match %s", quotaIDPattern)
	}
	q, ok := f.quotas[*id]
	if !ok {
		return nil, BadRequest("ResourceNotFound", "compute quota %s does not exist", *id)
	}
	return q, nil
}

func (q *Quota) out() quotaOut {
	return quotaOut{
		ComputeQuotaArn: q.ARN, ComputeQuotaId: q.ID, Name: q.Name, ComputeQuotaVersion: q.Version,
		Status: q.Status, FailureReason: q.FailureReason, ClusterArn: q.ClusterArn,
		ComputeQuotaConfig: q.Config, ComputeQuotaTarget: q.Target, ActivationState: q.Activation,
		CreationTime:     epoch(q.Created),
		LastModifiedTime: epoch(q.Modified),
	}
}

func (f *SageMaker) describe(in quotaDescribeIn) (any, *Error) {
	q, e := f.lookup(in.ComputeQuotaId)
	if e != nil {
		return nil, e
	}
	if in.ComputeQuotaVersion != nil && *in.ComputeQuotaVersion != q.Version {
		return nil, BadRequest("ResourceNotFound", "compute quota %s has no version %d", q.ID, *in.ComputeQuotaVersion)
	}
	if !f.tick(q) {
		return nil, BadRequest("ResourceNotFound", "compute quota %s does not exist", q.ID)
	}
	o := q.out()
	if q.Status != "CreateFailed" && q.Status != "UpdateFailed" {
		o.FailureReason = ""
	}
	return o, nil
}

func (f *SageMaker) update(in quotaUpdateIn) (any, *Error) {
	q, e := f.lookup(in.ComputeQuotaId)
	if e != nil {
		return nil, e
	}
	if in.TargetVersion == nil {
		return nil, Validation("TargetVersion is required")
	}
	if !slices.Contains([]string{"Created", "Updated", "UpdateFailed"}, q.Status) {
		return nil, BadRequest("ConflictException", "compute quota %s is %s", q.ID, q.Status)
	}
	if *in.TargetVersion != q.Version {
		return nil, BadRequest("ConflictException", "TargetVersion %d is not the current version %d", *in.TargetVersion, q.Version)
	}
	if !Enum(in.ActivationState, types.ActivationState("").Values()) {
		return nil, Validation("ActivationState %q is not valid", *in.ActivationState)
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
	f.targets = append(f.targets, *in.TargetVersion)
	q.Version++
	q.Status, q.Pending, q.Final, q.FailureReason = "Updating", f.SettleAfter, "Updated", ""
	q.Modified = time.Now()
	f.event("updated", "compute-quota")
	return map[string]any{"ComputeQuotaArn": q.ARN, "ComputeQuotaVersion": q.Version}, nil
}

func (f *SageMaker) list(in quotaListIn) (any, *Error) {
	max, e := maxResults(in.MaxResults, 10, 100)
	if e != nil {
		return nil, e
	}
	if in.ClusterArn != nil && !clusterARNPattern.MatchString(*in.ClusterArn) {
		return nil, Validation("ClusterArn %q does not match %s", *in.ClusterArn, clusterARNPattern)
	}
	if !Enum(in.Status, types.SchedulerResourceStatus("").Values()) {
		return nil, Validation("Status %q is not valid", *in.Status)
	}
	var all []quotaOut
	for _, q := range f.quotas {
		if (q.Status == "Deleting" || q.Status == "Deleted") && !f.tick(q) {
			continue
		}
		if in.ClusterArn != nil && q.ClusterArn != *in.ClusterArn ||
			in.NameContains != nil && !strings.Contains(q.Name, *in.NameContains) ||
			in.Status != nil && q.Status != *in.Status {
			continue
		}
		all = append(all, q.out())
	}
	slices.SortFunc(all, func(a, b quotaOut) int { return strings.Compare(a.ComputeQuotaId, b.ComputeQuotaId) })
	for i := range all {
		all[i].FailureReason = "" // not a member of ComputeQuotaSummary
	}
	return listing("ComputeQuotaSummaries", all, max, in.NextToken)
}

func (f *SageMaker) delete(in quotaDeleteIn) (any, *Error) {
	q, e := f.lookup(in.ComputeQuotaId)
	if e != nil {
		return nil, e
	}
	switch q.Status {
	case "Deleting", "Deleted":
		return nil, BadRequest("ResourceNotFound", "compute quota %s is %s", q.ID, q.Status)
	case "Creating", "Updating":
		return nil, BadRequest("ConflictException", "compute quota %s is %s", q.ID, q.Status)
	}
	q.Status, q.Pending, q.Final, q.FailureReason = "Deleting", f.SettleAfter, "Deleted", ""
	q.Modified = time.Now()
	f.event("deleted", "compute-quota")
	return map[string]any{}, nil
}

// tick moves a quota one Describe (or, while it is being deleted, one
// List) closer to its final status; a deleted quota is answered as Deleted
// for DeletedLinger more calls, then it is gone (and false is returned).
func (f *SageMaker) tick(q *Quota) bool {
	if q.Status == "Deleted" {
		if q.Linger <= 0 {
			delete(f.quotas, q.ID)
			return false
		}
		q.Linger--
		return true
	}
	if q.Pending > 0 {
		q.Pending--
	}
	if q.Pending == 0 && q.Status != q.Final {
		q.Status = q.Final
		if q.Status == "Deleted" {
			q.Linger = f.DeletedLinger
		}
		if q.Status == "Created" && f.OnQuotaCreated != nil {
			f.OnQuotaCreated(aws.ToString(q.Target.TeamName), q.ClusterArn)
		}
	}
	return true
}

// UpdateTargets are the TargetVersions of the UpdateComputeQuota calls the
// endpoint accepted, in order: each is the version the update was made
// from (a stale one is refused with ConflictException), and the quota's
// version is one more after it.
func (f *SageMaker) UpdateTargets() []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.targets)
}

// Quota is a copy of the stored quota id (zero when there is none).
func (f *SageMaker) Quota(id string) Quota {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q, ok := f.quotas[id]; ok {
		return *q
	}
	return Quota{}
}

// Quotas is how many quotas exist, not counting those being deleted or
// deleted.
func (f *SageMaker) Quotas() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, q := range f.quotas {
		if q.Status != "Deleting" && q.Status != "Deleted" {
			n++
		}
	}
	return n
}

// QuotaByName is a copy of the quota named name that is not being deleted
// (zero when there is none).
func (f *SageMaker) QuotaByName(name string) Quota {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.quotas {
		if q.Name == name && q.Status != "Deleting" && q.Status != "Deleted" {
			return *q
		}
	}
	return Quota{}
}

// AddForeignQuota stores a quota as someone else made it (in the console,
// or another tool): created and settled, with tags (nil for none).
func (f *SageMaker) AddForeignQuota(name, clusterARN, team string, tags map[string]string) Quota {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("q%011d", f.nextID)
	now := time.Now()
	dontLend := string(types.ResourceSharingStrategyDontlend)
	q := &Quota{
		ID: id, ARN: "arn:aws:sagemaker:" + Region + ":" + Account + ":compute-quota/" + id,
		Name: name, ClusterArn: clusterARN,
		Config:     (&quotaConfig{ResourceSharingConfig: &quotaSharing{Strategy: &dontLend}}).withDefaults(),
		Target:     &quotaTarget{TeamName: aws.String(team), FairShareWeight: aws.Int32(0)},
		Activation: string(types.ActivationStateEnabled), Tags: tagList(tags),
		Version: 1, Status: "Created", Final: "Created", Created: now, Modified: now,
	}
	f.quotas[id] = q
	return *q
}

// ChangeQuota changes the stored quota id behind the portal's back (as a
// console edit would): fn edits a copy of its config and target, and the
// version goes up. False when there is no such quota.
func (f *SageMaker) ChangeQuota(id string, fn func(weight *int32, strategy *string)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, ok := f.quotas[id]
	if !ok {
		return false
	}
	t, c := *q.Target, *q.Config
	s := *c.ResourceSharingConfig
	w, st := aws.ToInt32(t.FairShareWeight), aws.ToString(s.Strategy)
	fn(&w, &st)
	t.FairShareWeight, s.Strategy = &w, &st
	if st != string(types.ResourceSharingStrategyLendandborrow) {
		s.BorrowLimit = nil
	}
	c.ResourceSharingConfig = &s
	q.Target, q.Config = &t, c.withDefaults()
	q.Version++
	return true
}
