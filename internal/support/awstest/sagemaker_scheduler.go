package awstest

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// SchedulerConfig is a stored HyperPod task governance cluster scheduler
// config (the console's "cluster policy"). A cluster has at most one.
type SchedulerConfig struct {
	ID, ARN, Name, ClusterArn string
	Description               string
	Config                    smSchedulerConfig
	Tags                      []Tag
	Version                   int32
	Status                    string
	Pending                   int    // describes left before settling
	Final                     string // status after settling
	FailureReason             string
	Created, Modified         time.Time
}

// PriorityClasses is the config's priority classes as "name=weight", in the
// order they were sent.
func (s SchedulerConfig) PriorityClasses() []string {
	out := make([]string, 0, len(s.Config.PriorityClasses))
	for _, p := range s.Config.PriorityClasses {
		out = append(out, fmt.Sprintf("%s=%d", aws.ToString(p.Name), aws.ToInt32(p.Weight)))
	}
	return out
}

// FairShare is the config's FairShare ("Enabled" when it was not sent, the
// API's default).
func (s SchedulerConfig) FairShare() string { return aws.ToString(s.Config.FairShare) }

// smSchedulers is the SageMaker endpoint's scheduler config state, kept
// apart from the compute quotas and domains.
type smSchedulers struct {
	byID   map[string]*SchedulerConfig
	nextID int
	// failure, when set, makes new configs end in CreateFailed with it as
	// the FailureReason (SetSchedulerFailure).
	failure string
}

// Request and response shapes of the scheduler config operations, with the
// service's member names (types.SchedulerConfig, types.PriorityClass, ...).
type (
	smPriorityClass struct {
		Name   *string `json:",omitempty"`
		Weight *int32  `json:",omitempty"`
	}
	smSchedulerConfig struct {
		PriorityClasses     []smPriorityClass `json:",omitempty"`
		FairShare           *string           `json:",omitempty"`
		IdleResourceSharing *string           `json:",omitempty"`
	}
	smSchedCreateIn struct {
		Name            *string
		ClusterArn      *string
		SchedulerConfig *smSchedulerConfig
		Description     *string
		Tags            []Tag
	}
	smSchedDescribeIn struct {
		ClusterSchedulerConfigId      *string
		ClusterSchedulerConfigVersion *int32
	}
	smSchedUpdateIn struct {
		ClusterSchedulerConfigId *string
		TargetVersion            *int32
		SchedulerConfig          *smSchedulerConfig
		Description              *string
	}
	smSchedListIn struct {
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
	smSchedDeleteIn struct {
		ClusterSchedulerConfigId *string
	}
	smSchedOut struct {
		ClusterSchedulerConfigArn     string
		ClusterSchedulerConfigId      string
		Name                          string
		ClusterSchedulerConfigVersion int32
		Status                        string
		FailureReason                 string `json:",omitempty"`
		ClusterArn                    string
		SchedulerConfig               smSchedulerConfig
		Description                   string `json:",omitempty"`
		CreationTime                  float64
		LastModifiedTime              float64
	}
	smSchedSummary struct {
		ClusterSchedulerConfigArn     string
		ClusterSchedulerConfigId      string
		ClusterSchedulerConfigVersion int32
		Name                          string
		Status                        string
		ClusterArn                    string
		CreationTime                  float64
		LastModifiedTime              float64
	}
)

// Patterns and limits of the SageMaker API model: Name is an EntityName
// (quotaNamePattern, 1-63), a priority class name a
// ClusterSchedulerPriorityClassName (at most 64), Weight a PriorityWeight
// (0-100), ClusterSchedulerConfigId 12 lowercase letters and digits,
// Description an EntityDescription (at most 4096).
var (
	smPriorityClassPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?$`)
	smSchedIDPattern       = regexp.MustCompile(`^[a-z0-9]{12}$`)
)

// smMaxPriorityClasses is the API's limit on PriorityClassList.
const smMaxPriorityClasses = 10

func (f *SageMaker) schedulerOps() map[string]handler {
	f.sched = &smSchedulers{byID: map[string]*SchedulerConfig{}}
	return map[string]handler{
		"CreateClusterSchedulerConfig": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smSchedCreateIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.createScheduler(in)
		},
		"DescribeClusterSchedulerConfig": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smSchedDescribeIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.describeScheduler(in)
		},
		"UpdateClusterSchedulerConfig": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smSchedUpdateIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.updateScheduler(in)
		},
		"ListClusterSchedulerConfigs": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smSchedListIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.listSchedulers(in)
		},
		"DeleteClusterSchedulerConfig": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smSchedDeleteIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.deleteScheduler(in)
		},
	}
}

// SetSchedulerFailure makes every scheduler config created from now on end
// in CreateFailed with reason as its FailureReason ("" turns it off).
func (f *SageMaker) SetSchedulerFailure(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sched.failure = reason
}

// checkSchedulerConfig refuses what the service refuses, and returns the
// config as stored: FairShare filled with its default (Enabled), as Describe
// returns it.
func checkSchedulerConfig(c *smSchedulerConfig) (smSchedulerConfig, *Error) {
	if !Enum(c.FairShare, types.FairShare("").Values()) {
		return smSchedulerConfig{}, Validation("1 validation error detected: Value '%s' at 'schedulerConfig.fairShare' failed to satisfy constraint: Member must satisfy enum value set: %v", *c.FairShare, types.FairShare("").Values())
	}
	if !Enum(c.IdleResourceSharing, types.IdleResourceSharing("").Values()) {
		return smSchedulerConfig{}, Validation("1 validation error detected: Value '%s' at 'schedulerConfig.idleResourceSharing' failed to satisfy constraint: Member must satisfy enum value set: %v", *c.IdleResourceSharing, types.IdleResourceSharing("").Values())
	}
	if len(c.PriorityClasses) > smMaxPriorityClasses {
		return smSchedulerConfig{}, Validation("1 validation error detected: Value at 'schedulerConfig.priorityClasses' failed to satisfy constraint: Member must have length less than or equal to %d", smMaxPriorityClasses)
	}
	seen := map[string]bool{}
	for i, p := range c.PriorityClasses {
		switch {
		case p.Name == nil || p.Weight == nil:
			return smSchedulerConfig{}, Validation("PriorityClasses[%d]: Name and Weight are required", i)
		case len(*p.Name) > 64 || !smPriorityClassPattern.MatchString(*p.Name):
			return smSchedulerConfig{}, Validation("1 validation error detected: Value '%s' at 'schedulerConfig.priorityClasses.%d.member.name' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *p.Name, i+1, smPriorityClassPattern)
		case *p.Weight < 0 || *p.Weight > 100:
			return smSchedulerConfig{}, Validation("1 validation error detected: Value '%d' at 'schedulerConfig.priorityClasses.%d.member.weight' failed to satisfy constraint: Member must have value between 0 and 100", *p.Weight, i+1)
		case seen[*p.Name]:
			return smSchedulerConfig{}, Validation("priority class %s appears more than once", *p.Name)
		}
		seen[*p.Name] = true
	}
	out := smSchedulerConfig{
		PriorityClasses:     slices.Clone(c.PriorityClasses),
		FairShare:           c.FairShare,
		IdleResourceSharing: c.IdleResourceSharing,
	}
	if out.FairShare == nil {
		out.FairShare = aws.String(string(types.FairShareEnabled))
	}
	return out, nil
}

func smCheckSchedDescription(d *string) *Error {
	if d != nil && len(*d) > 4096 {
		return Validation("Description is longer than 4096")
	}
	return nil
}

func (f *SageMaker) createScheduler(in smSchedCreateIn) (any, *Error) {
	switch {
	case in.Name == nil || in.ClusterArn == nil || in.SchedulerConfig == nil:
		return nil, Validation("Name, ClusterArn and SchedulerConfig are required")
	case len(*in.Name) > 63 || !quotaNamePattern.MatchString(*in.Name):
		return nil, Validation("1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *in.Name, quotaNamePattern)
	case !clusterARNPattern.MatchString(*in.ClusterArn):
		return nil, Validation("1 validation error detected: Value '%s' at 'clusterArn' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *in.ClusterArn, clusterARNPattern)
	}
	if e := smCheckSchedDescription(in.Description); e != nil {
		return nil, e
	}
	cfg, e := checkSchedulerConfig(in.SchedulerConfig)
	if e != nil {
		return nil, e
	}
	for _, tag := range in.Tags {
		if tag.Key == nil || tag.Value == nil || *tag.Key == "" || strings.HasPrefix(*tag.Key, "aws:") {
			return nil, Validation("tags need a Key (not aws:) and a Value")
		}
	}
	// A cluster has one scheduler config: a second is refused whatever its
	// name.
	for _, s := range f.sched.byID {
		if s.ClusterArn == *in.ClusterArn {
			return nil, BadRequest("ConflictException", "cluster %s already has a cluster policy: %s (%s)", s.ClusterArn, s.Name, s.ID)
		}
	}
	f.sched.nextID++
	id := fmt.Sprintf("s%011d", f.sched.nextID)
	now := time.Now()
	s := &SchedulerConfig{
		ID: id, ARN: "arn:aws:sagemaker:" + Region + ":" + Account + ":cluster-scheduler-config/" + id,
		Name: *in.Name, ClusterArn: *in.ClusterArn, Description: aws.ToString(in.Description),
		Config: cfg, Tags: in.Tags,
		Version: 1, Status: "Creating", Pending: f.SettleAfter, Final: "Created",
		Created: now, Modified: now,
	}
	if f.sched.failure != "" {
		s.Final, s.FailureReason = "CreateFailed", f.sched.failure
	}
	f.sched.byID[id] = s
	f.event("created", "scheduler-config")
	if f.LoseCreateResponses > 0 {
		f.LoseCreateResponses--
		return nil, Errorf(http.StatusInternalServerError, "InternalFailure", "internal failure")
	}
	return map[string]string{"ClusterSchedulerConfigArn": s.ARN, "ClusterSchedulerConfigId": id}, nil
}

func (f *SageMaker) lookupScheduler(id *string) (*SchedulerConfig, *Error) {
	if id == nil || !smSchedIDPattern.MatchString(*id) {
		return nil, Validation("ClusterSchedulerConfigId is required and must match %s", smSchedIDPattern)
	}
	s, ok := f.sched.byID[*id]
	if !ok {
		return nil, BadRequest("ResourceNotFound", "cluster policy %s does not exist", *id)
	}
	return s, nil
}

func (s *SchedulerConfig) out() smSchedOut {
	o := smSchedOut{
		ClusterSchedulerConfigArn: s.ARN, ClusterSchedulerConfigId: s.ID, Name: s.Name,
		ClusterSchedulerConfigVersion: s.Version, Status: s.Status, ClusterArn: s.ClusterArn,
		SchedulerConfig: s.Config, Description: s.Description,
		CreationTime: epoch(s.Created), LastModifiedTime: epoch(s.Modified),
	}
	if s.Status == "CreateFailed" || s.Status == "UpdateFailed" {
		o.FailureReason = s.FailureReason
	}
	return o
}

func (s *SchedulerConfig) summary() smSchedSummary {
	return smSchedSummary{
		ClusterSchedulerConfigArn: s.ARN, ClusterSchedulerConfigId: s.ID,
		ClusterSchedulerConfigVersion: s.Version, Name: s.Name, Status: s.Status, ClusterArn: s.ClusterArn,
		CreationTime: epoch(s.Created), LastModifiedTime: epoch(s.Modified),
	}
}

func (f *SageMaker) describeScheduler(in smSchedDescribeIn) (any, *Error) {
	s, e := f.lookupScheduler(in.ClusterSchedulerConfigId)
	if e != nil {
		return nil, e
	}
	if in.ClusterSchedulerConfigVersion != nil && *in.ClusterSchedulerConfigVersion != s.Version {
		return nil, BadRequest("ResourceNotFound", "cluster policy %s has no version %d", s.ID, *in.ClusterSchedulerConfigVersion)
	}
	if s.Pending > 0 {
		s.Pending--
	}
	if s.Pending == 0 {
		s.Status = s.Final
	}
	return s.out(), nil
}

func (f *SageMaker) updateScheduler(in smSchedUpdateIn) (any, *Error) {
	s, e := f.lookupScheduler(in.ClusterSchedulerConfigId)
	if e != nil {
		return nil, e
	}
	if in.TargetVersion == nil {
		return nil, Validation("TargetVersion is required")
	}
	if !slices.Contains([]string{"Created", "Updated", "UpdateFailed"}, s.Status) {
		return nil, BadRequest("ConflictException", "cluster policy %s is %s", s.ID, s.Status)
	}
	if *in.TargetVersion != s.Version {
		return nil, BadRequest("ConflictException", "TargetVersion %d is not the current version %d", *in.TargetVersion, s.Version)
	}
	if e := smCheckSchedDescription(in.Description); e != nil {
		return nil, e
	}
	if in.SchedulerConfig != nil {
		cfg, e := checkSchedulerConfig(in.SchedulerConfig)
		if e != nil {
			return nil, e
		}
		s.Config = cfg
	}
	if in.Description != nil {
		s.Description = *in.Description
	}
	s.Version++
	s.Status, s.Pending, s.Final, s.FailureReason = "Updating", f.SettleAfter, "Updated", ""
	s.Modified = time.Now()
	f.event("updated", "scheduler-config")
	return map[string]any{"ClusterSchedulerConfigArn": s.ARN, "ClusterSchedulerConfigVersion": s.Version}, nil
}

func (f *SageMaker) listSchedulers(in smSchedListIn) (any, *Error) {
	max, e := maxResults(in.MaxResults, 10, 100)
	if e != nil {
		return nil, e
	}
	switch {
	case in.ClusterArn != nil && !clusterARNPattern.MatchString(*in.ClusterArn):
		return nil, Validation("ClusterArn %q does not match %s", *in.ClusterArn, clusterARNPattern)
	case !Enum(in.Status, types.SchedulerResourceStatus("").Values()):
		return nil, Validation("Status %q is not valid", *in.Status)
	case !Enum(in.SortBy, types.SortClusterSchedulerConfigBy("").Values()):
		return nil, Validation("SortBy %q is not valid", *in.SortBy)
	case !Enum(in.SortOrder, types.SortOrder("").Values()):
		return nil, Validation("SortOrder %q is not valid", *in.SortOrder)
	case in.NameContains != nil && (len(*in.NameContains) > 63 || !quotaNamePattern.MatchString(*in.NameContains)):
		return nil, Validation("NameContains %q does not match %s", *in.NameContains, quotaNamePattern)
	}
	var all []smSchedSummary
	for _, s := range f.sched.byID {
		if in.ClusterArn != nil && s.ClusterArn != *in.ClusterArn ||
			in.NameContains != nil && !strings.Contains(s.Name, *in.NameContains) ||
			in.Status != nil && s.Status != *in.Status ||
			in.CreatedAfter != nil && epoch(s.Created) <= *in.CreatedAfter ||
			in.CreatedBefore != nil && epoch(s.Created) >= *in.CreatedBefore {
			continue
		}
		all = append(all, s.summary())
	}
	slices.SortFunc(all, func(a, b smSchedSummary) int {
		return strings.Compare(a.ClusterSchedulerConfigId, b.ClusterSchedulerConfigId)
	})
	return listing("ClusterSchedulerConfigSummaries", all, max, in.NextToken)
}

func (f *SageMaker) deleteScheduler(in smSchedDeleteIn) (any, *Error) {
	s, e := f.lookupScheduler(in.ClusterSchedulerConfigId)
	if e != nil {
		return nil, e
	}
	if s.Status == "Creating" || s.Status == "Updating" {
		return nil, BadRequest("ConflictException", "cluster policy %s is %s", s.ID, s.Status)
	}
	delete(f.sched.byID, s.ID)
	f.event("deleted", "scheduler-config")
	return map[string]any{}, nil
}

// SchedulerConfig is a copy of the stored scheduler config id (zero when
// there is none).
func (f *SageMaker) SchedulerConfig(id string) SchedulerConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sched.byID[id]; ok {
		c := *s
		c.Config.PriorityClasses, c.Tags = slices.Clone(s.Config.PriorityClasses), slices.Clone(s.Tags)
		return c
	}
	return SchedulerConfig{}
}

// SchedulerConfigs is how many scheduler configs exist, on every cluster.
func (f *SageMaker) SchedulerConfigs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sched.byID)
}
