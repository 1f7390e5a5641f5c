package awstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// Domain is a stored SageMaker domain.
type Domain struct {
	ID, ARN, Name, URL   string
	AuthMode             string
	UserSettings         smUserSettings
	SubnetIDs            []string
	VpcID                string
	AppNetworkAccessType string
	KmsKeyID             string
	Tags                 []Tag
	HomeEfsFileSystemID  string
	// SSOApplicationARN is the domain's IAM Identity Center application (SSO
	// domains only); Describe returns it once the domain is InService.
	SSOApplicationARN string
	Status            string
	Pending           int    // describes left before settling
	Final             string // status after settling
	FailureReason     string
	// HomeEfsRetention is the RetentionPolicy DeleteDomain was called with
	// ("Retain" when it sent none).
	HomeEfsRetention  string
	Created, Modified time.Time
}

// ExecutionRole is the domain's DefaultUserSettings.ExecutionRole.
func (d Domain) ExecutionRole() string {
	if d.UserSettings.ExecutionRole == nil {
		return ""
	}
	return *d.UserSettings.ExecutionRole
}

// SecurityGroups is the domain's DefaultUserSettings.SecurityGroups.
func (d Domain) SecurityGroups() []string { return slices.Clone(d.UserSettings.SecurityGroups) }

// smDomains is the SageMaker endpoint's domain state, kept apart from the
// compute quotas.
type smDomains struct {
	byID   map[string]*Domain
	nextID int
	sso    *SSOAdmin // where SSO domains register their application
}

// Request and response shapes of the domain operations, with the service's
// member names (types.UserSettings, CreateDomainInput, ...). Members the
// endpoint does not inspect are kept raw, so that it still refuses a member
// the service does not know.
type (
	smUserSettings struct {
		AutoMountHomeEFS            *string         `json:",omitempty"`
		CanvasAppSettings           json.RawMessage `json:",omitempty"`
		CodeEditorAppSettings       json.RawMessage `json:",omitempty"`
		CustomFileSystemConfigs     json.RawMessage `json:",omitempty"`
		CustomPosixUserConfig       json.RawMessage `json:",omitempty"`
		DefaultLandingUri           *string         `json:",omitempty"`
		ExecutionRole               *string         `json:",omitempty"`
		JupyterLabAppSettings       json.RawMessage `json:",omitempty"`
		JupyterServerAppSettings    json.RawMessage `json:",omitempty"`
		KernelGatewayAppSettings    json.RawMessage `json:",omitempty"`
		RSessionAppSettings         json.RawMessage `json:",omitempty"`
		RStudioServerProAppSettings json.RawMessage `json:",omitempty"`
		SecurityGroups              []string        `json:",omitempty"`
		SharingSettings             json.RawMessage `json:",omitempty"`
		SpaceStorageSettings        json.RawMessage `json:",omitempty"`
		StudioWebPortal             *string         `json:",omitempty"`
		StudioWebPortalSettings     json.RawMessage `json:",omitempty"`
		TensorBoardAppSettings      json.RawMessage `json:",omitempty"`
	}
	smDomainCreateIn struct {
		AppNetworkAccessType       *string
		AppSecurityGroupManagement *string
		AuthMode                   *string
		DefaultSpaceSettings       json.RawMessage
		DefaultUserSettings        *smUserSettings
		DomainName                 *string
		DomainSettings             json.RawMessage
		HomeEfsFileSystemCreation  *string
		HomeEfsFileSystemKmsKeyId  *string
		KmsKeyId                   *string
		SubnetIds                  []string
		TagPropagation             *string
		Tags                       []Tag
		VpcId                      *string
	}
	smDomainUpdateIn struct {
		DomainId                   *string
		AppNetworkAccessType       *string
		AppSecurityGroupManagement *string
		DefaultSpaceSettings       json.RawMessage
		DefaultUserSettings        *smUserSettings
		DomainSettingsForUpdate    json.RawMessage
		HomeEfsFileSystemCreation  *string
		SubnetIds                  []string
		TagPropagation             *string
		VpcId                      *string
	}
	smDomainIDIn struct {
		DomainId *string
	}
	smDomainListIn struct {
		MaxResults *int32
		NextToken  *string
	}
	smDomainDeleteIn struct {
		DomainId        *string
		RetentionPolicy *struct {
			HomeEfsFileSystem *string
		}
	}
	smDomainOut struct {
		DomainArn                  string
		DomainId                   string
		DomainName                 string
		Url                        string
		Status                     string
		FailureReason              string `json:",omitempty"`
		AuthMode                   string
		AppNetworkAccessType       string
		DefaultUserSettings        smUserSettings
		SubnetIds                  []string
		VpcId                      string
		KmsKeyId                   string `json:",omitempty"`
		HomeEfsFileSystemId        string `json:",omitempty"`
		SingleSignOnApplicationArn string `json:",omitempty"`
		CreationTime               float64
		LastModifiedTime           float64
	}
	smDomainSummary struct {
		DomainArn        string
		DomainId         string
		DomainName       string
		Url              string
		Status           string
		CreationTime     float64
		LastModifiedTime float64
	}
)

// Patterns and limits of the SageMaker API model (DomainName, DomainId,
// RoleArn, KmsKeyId, Tag). SubnetId, VpcId and SecurityGroupId are only
// [-0-9a-zA-Z]{1,32} in the model, but the service then looks them up in EC2
// and refuses ids that do not exist; the EC2 id formats below stand in for
// that look-up.
var (
	smDomainNamePattern = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	smDomainIDPattern   = regexp.MustCompile(`^d-(-*[a-z0-9]){1,61}$`)
	smRoleARNPattern    = regexp.MustCompile(`^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$`)
	smSubnetPattern     = regexp.MustCompile(`^subnet-([0-9a-f]{8}|[0-9a-f]{17})$`)
	smVpcPattern        = regexp.MustCompile(`^vpc-([0-9a-f]{8}|[0-9a-f]{17})$`)
	smSGPattern         = regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`)
)

func (f *SageMaker) domainOps() map[string]handler {
	f.dom = &smDomains{byID: map[string]*Domain{}}
	return map[string]handler{
		"CreateDomain": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smDomainCreateIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.createDomain(in)
		},
		"DescribeDomain": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smDomainIDIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.describeDomain(in)
		},
		"ListDomains": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smDomainListIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.listDomains(in)
		},
		"UpdateDomain": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smDomainUpdateIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.updateDomain(in)
		},
		"DeleteDomain": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smDomainDeleteIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.deleteDomain(in)
		},
	}
}

// LinkSSOAdmin makes every SSO domain created from now on register its IAM
// Identity Center application with s, as the service does, so that s accepts
// assignments to it; the application goes away with the domain.
func (f *SageMaker) LinkSSOAdmin(s *SSOAdmin) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dom.sso = s
}

func smCheckSecurityGroups(sgs []string) *Error {
	if len(sgs) > 5 {
		return Validation("1 validation error detected: Value at 'defaultUserSettings.securityGroups' failed to satisfy constraint: Member must have length less than or equal to 5")
	}
	for _, sg := range sgs {
		if !smSGPattern.MatchString(sg) {
			return Validation("Security group %q is not a valid security group id", sg)
		}
	}
	return nil
}

func smCheckUserSettings(s *smUserSettings) *Error {
	if s.ExecutionRole != nil && (len(*s.ExecutionRole) < 20 || len(*s.ExecutionRole) > 2048 || !smRoleARNPattern.MatchString(*s.ExecutionRole)) {
		return Validation("1 validation error detected: Value '%s' at 'defaultUserSettings.executionRole' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *s.ExecutionRole, smRoleARNPattern)
	}
	return smCheckSecurityGroups(s.SecurityGroups)
}

func smCheckSubnets(subnets []string) *Error {
	if len(subnets) < 1 || len(subnets) > 16 {
		return Validation("1 validation error detected: Value at 'subnetIds' failed to satisfy constraint: Member must have length between 1 and 16")
	}
	seen := map[string]bool{}
	for _, s := range subnets {
		if !smSubnetPattern.MatchString(s) {
			return Validation("Subnet %q is not a valid subnet id", s)
		}
		if seen[s] {
			return Validation("Subnet %s appears twice", s)
		}
		seen[s] = true
	}
	return nil
}

func (f *SageMaker) createDomain(in smDomainCreateIn) (any, *Error) {
	switch {
	case in.DomainName == nil || in.AuthMode == nil || in.DefaultUserSettings == nil:
		return nil, Validation("DomainName, AuthMode and DefaultUserSettings are required")
	case in.SubnetIds == nil || in.VpcId == nil:
		return nil, Validation("SubnetIds and VpcId are required")
	case !smDomainNamePattern.MatchString(*in.DomainName):
		return nil, Validation("1 validation error detected: Value '%s' at 'domainName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *in.DomainName, smDomainNamePattern)
	case !Enum(in.AuthMode, types.AuthMode("").Values()):
		return nil, Validation("1 validation error detected: Value '%s' at 'authMode' failed to satisfy constraint: Member must satisfy enum value set: %v", *in.AuthMode, types.AuthMode("").Values())
	case !Enum(in.AppNetworkAccessType, types.AppNetworkAccessType("").Values()):
		return nil, Validation("1 validation error detected: Value '%s' at 'appNetworkAccessType' failed to satisfy constraint: Member must satisfy enum value set: %v", *in.AppNetworkAccessType, types.AppNetworkAccessType("").Values())
	case !Enum(in.AppSecurityGroupManagement, types.AppSecurityGroupManagement("").Values()):
		return nil, Validation("AppSecurityGroupManagement %q is not valid", *in.AppSecurityGroupManagement)
	case !Enum(in.HomeEfsFileSystemCreation, types.HomeEfsFileSystemCreation("").Values()):
		return nil, Validation("HomeEfsFileSystemCreation %q is not valid", *in.HomeEfsFileSystemCreation)
	case !Enum(in.TagPropagation, types.TagPropagation("").Values()):
		return nil, Validation("TagPropagation %q is not valid", *in.TagPropagation)
	case in.KmsKeyId != nil && len(*in.KmsKeyId) > 2048:
		return nil, Validation("KmsKeyId is longer than 2048")
	case !smVpcPattern.MatchString(*in.VpcId):
		return nil, Validation("VPC %q is not a valid VPC id", *in.VpcId)
	}
	if e := smCheckSubnets(in.SubnetIds); e != nil {
		return nil, e
	}
	if e := smCheckUserSettings(in.DefaultUserSettings); e != nil {
		return nil, e
	}
	if in.DefaultUserSettings.ExecutionRole == nil {
		return nil, Validation("DefaultUserSettings.ExecutionRole is required")
	}
	access := string(types.AppNetworkAccessTypePublicInternetOnly) // the API's default
	if in.AppNetworkAccessType != nil {
		access = *in.AppNetworkAccessType
	}
	if access == string(types.AppNetworkAccessTypeVpcOnly) && len(in.DefaultUserSettings.SecurityGroups) == 0 {
		return nil, Validation("DefaultUserSettings.SecurityGroups is required when AppNetworkAccessType is VpcOnly")
	}
	if len(in.Tags) > 50 {
		return nil, Validation("at most 50 tags")
	}
	for _, tag := range in.Tags {
		if tag.Key == nil || *tag.Key == "" || len(*tag.Key) > 128 || strings.HasPrefix(*tag.Key, "aws:") ||
			tag.Value != nil && len(*tag.Value) > 256 {
			return nil, Validation("tags need a Key of 1-128 characters (not aws:) and a Value of at most 256")
		}
	}
	for _, d := range f.dom.byID {
		if d.Name == *in.DomainName {
			return nil, BadRequest("ResourceInUse", "Domain with name %s already exists: %s", d.Name, d.ARN)
		}
	}

	f.dom.nextID++
	n := f.dom.nextID
	id := fmt.Sprintf("d-%012d", n)
	now := time.Now()
	d := &Domain{
		ID: id, ARN: "arn:aws:sagemaker:" + Region + ":" + Account + ":domain/" + id, Name: *in.DomainName,
		URL:      "https://" + id + ".studio." + Region + ".sagemaker.aws",
		AuthMode: *in.AuthMode, UserSettings: *in.DefaultUserSettings,
		SubnetIDs: in.SubnetIds, VpcID: *in.VpcId, AppNetworkAccessType: access,
		Tags: in.Tags, HomeEfsFileSystemID: fmt.Sprintf("fs-%017x", n),
		Status: "Pending", Pending: f.SettleAfter, Final: "InService",
		Created: now, Modified: now,
	}
	if in.KmsKeyId != nil {
		d.KmsKeyID = *in.KmsKeyId
	}
	if d.AuthMode == string(types.AuthModeSso) {
		instance := SSOInstanceID
		if f.dom.sso != nil {
			instance = f.dom.sso.instanceID
		}
		d.SSOApplicationARN = fmt.Sprintf("arn:aws:sso::%s:application/%s/apl-%016x", Account, instance, n)
	}
	if f.DomainFailure != "" {
		d.Final, d.FailureReason = "Failed", f.DomainFailure
	}
	f.dom.byID[id] = d
	f.event("created", "domain")
	if f.LoseCreateResponses > 0 {
		f.LoseCreateResponses--
		return nil, Errorf(http.StatusInternalServerError, "InternalFailure", "internal failure")
	}
	return map[string]string{"DomainArn": d.ARN, "DomainId": id, "Url": d.URL}, nil
}

func (f *SageMaker) lookupDomain(id *string) (*Domain, *Error) {
	if id == nil || len(*id) > 63 || !smDomainIDPattern.MatchString(*id) {
		return nil, Validation("DomainId is required and must match %s", smDomainIDPattern)
	}
	d, ok := f.dom.byID[*id]
	if !ok {
		return nil, BadRequest("ResourceNotFound", "Domain %s does not exist", *id)
	}
	return d, nil
}

// settle moves a domain one Describe closer to its final status: it comes
// into service (registering its SSO application), fails, or, when it was
// being deleted, is gone (and false is returned).
func (f *SageMaker) settle(d *Domain) bool {
	if d.Pending > 0 {
		d.Pending--
	}
	if d.Pending > 0 || d.Status == d.Final {
		return true
	}
	d.Status = d.Final
	switch d.Status {
	case "InService":
		d.FailureReason = ""
		if d.SSOApplicationARN != "" && f.dom.sso != nil {
			f.dom.sso.AddApplication(d.SSOApplicationARN)
		}
	case "Deleted":
		delete(f.dom.byID, d.ID)
		if d.SSOApplicationARN != "" && f.dom.sso != nil {
			f.dom.sso.removeApplication(d.SSOApplicationARN)
		}
		if d.HomeEfsRetention == string(types.RetentionTypeRetain) {
			f.event("retained", "home-efs")
		} else {
			f.event("deleted", "home-efs")
		}
		return false
	}
	return true
}

func (d *Domain) out() smDomainOut {
	o := smDomainOut{
		DomainArn: d.ARN, DomainId: d.ID, DomainName: d.Name, Url: d.URL, Status: d.Status,
		AuthMode: d.AuthMode, AppNetworkAccessType: d.AppNetworkAccessType,
		DefaultUserSettings: d.UserSettings, SubnetIds: d.SubnetIDs, VpcId: d.VpcID,
		KmsKeyId: d.KmsKeyID, HomeEfsFileSystemId: d.HomeEfsFileSystemID,
		CreationTime: epoch(d.Created), LastModifiedTime: epoch(d.Modified),
	}
	if d.Status == "Failed" || d.Status == "Update_Failed" || d.Status == "Delete_Failed" {
		o.FailureReason = d.FailureReason
	}
	// The Identity Center application exists once the domain is in service.
	if d.Status != "Pending" && d.Status != "Failed" {
		o.SingleSignOnApplicationArn = d.SSOApplicationARN
	}
	return o
}

func (f *SageMaker) describeDomain(in smDomainIDIn) (any, *Error) {
	d, e := f.lookupDomain(in.DomainId)
	if e != nil {
		return nil, e
	}
	if !f.settle(d) {
		return nil, BadRequest("ResourceNotFound", "Domain %s does not exist", d.ID)
	}
	return d.out(), nil
}

func (f *SageMaker) listDomains(in smDomainListIn) (any, *Error) {
	max, e := maxResults(in.MaxResults, 10, 100)
	if e != nil {
		return nil, e
	}
	var all []smDomainSummary
	for _, d := range f.dom.byID {
		all = append(all, smDomainSummary{
			DomainArn: d.ARN, DomainId: d.ID, DomainName: d.Name, Url: d.URL, Status: d.Status,
			CreationTime: epoch(d.Created), LastModifiedTime: epoch(d.Modified),
		})
	}
	slices.SortFunc(all, func(a, b smDomainSummary) int { return strings.Compare(a.DomainId, b.DomainId) })
	return listing("Domains", all, max, in.NextToken)
}

// merge sets every member of in that was sent, as UpdateDomain does: what
// the request leaves out keeps its value.
func (s *smUserSettings) merge(in *smUserSettings) {
	dst, src := reflect.ValueOf(s).Elem(), reflect.ValueOf(in).Elem()
	for i := range src.NumField() {
		if !src.Field(i).IsNil() {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

func (f *SageMaker) updateDomain(in smDomainUpdateIn) (any, *Error) {
	d, e := f.lookupDomain(in.DomainId)
	if e != nil {
		return nil, e
	}
	if d.Status != "InService" && d.Status != "Update_Failed" {
		return nil, BadRequest("ResourceInUse", "Domain %s is %s; it can be updated only when InService", d.ID, d.Status)
	}
	switch {
	case !Enum(in.AppNetworkAccessType, types.AppNetworkAccessType("").Values()):
		return nil, Validation("1 validation error detected: Value '%s' at 'appNetworkAccessType' failed to satisfy constraint: Member must satisfy enum value set: %v", *in.AppNetworkAccessType, types.AppNetworkAccessType("").Values())
	case !Enum(in.AppSecurityGroupManagement, types.AppSecurityGroupManagement("").Values()):
		return nil, Validation("AppSecurityGroupManagement %q is not valid", *in.AppSecurityGroupManagement)
	case !Enum(in.HomeEfsFileSystemCreation, types.HomeEfsFileSystemCreation("").Values()):
		return nil, Validation("HomeEfsFileSystemCreation %q is not valid", *in.HomeEfsFileSystemCreation)
	case !Enum(in.TagPropagation, types.TagPropagation("").Values()):
		return nil, Validation("TagPropagation %q is not valid", *in.TagPropagation)
	case in.VpcId != nil && *in.VpcId != d.VpcID:
		// VpcId only adds a VPC to a domain created without one.
		return nil, Validation("Domain %s already uses VPC %s; its VPC cannot be changed", d.ID, d.VpcID)
	}
	if in.SubnetIds != nil {
		if e := smCheckSubnets(in.SubnetIds); e != nil {
			return nil, e
		}
	}
	settings := d.UserSettings
	if in.DefaultUserSettings != nil {
		if e := smCheckUserSettings(in.DefaultUserSettings); e != nil {
			return nil, e
		}
		settings.merge(in.DefaultUserSettings)
	}
	access := d.AppNetworkAccessType
	if in.AppNetworkAccessType != nil {
		access = *in.AppNetworkAccessType
	}
	if access == string(types.AppNetworkAccessTypeVpcOnly) && len(settings.SecurityGroups) == 0 {
		return nil, Validation("DefaultUserSettings.SecurityGroups is required when AppNetworkAccessType is VpcOnly")
	}
	d.UserSettings, d.AppNetworkAccessType = settings, access
	if in.SubnetIds != nil {
		d.SubnetIDs = in.SubnetIds
	}
	d.Status, d.Pending, d.Final, d.FailureReason = "Updating", f.SettleAfter, "InService", ""
	d.Modified = time.Now()
	f.event("updated", "domain")
	return map[string]string{"DomainArn": d.ARN}, nil
}

func (f *SageMaker) deleteDomain(in smDomainDeleteIn) (any, *Error) {
	d, e := f.lookupDomain(in.DomainId)
	if e != nil {
		return nil, e
	}
	retention := string(types.RetentionTypeRetain) // the API's default
	if p := in.RetentionPolicy; p != nil && p.HomeEfsFileSystem != nil {
		if !Enum(p.HomeEfsFileSystem, types.RetentionType("").Values()) {
			return nil, Validation("1 validation error detected: Value '%s' at 'retentionPolicy.homeEfsFileSystem' failed to satisfy constraint: Member must satisfy enum value set: %v", *p.HomeEfsFileSystem, types.RetentionType("").Values())
		}
		retention = *p.HomeEfsFileSystem
	}
	if d.Status == "Pending" || d.Status == "Updating" || d.Status == "Deleting" {
		return nil, BadRequest("ResourceInUse", "Domain %s is %s", d.ID, d.Status)
	}
	if f.DomainUserProfiles > 0 {
		return nil, BadRequest("ResourceInUse", "Domain %s has %d user profiles; delete them (and their spaces and apps) before deleting the domain", d.ID, f.DomainUserProfiles)
	}
	d.HomeEfsRetention = retention
	d.Status, d.Pending, d.Final, d.FailureReason = "Deleting", f.SettleAfter, "Deleted", ""
	d.Modified = time.Now()
	f.event("deleted", "domain")
	return map[string]any{}, nil
}

// Domain is a copy of the stored domain id (zero when there is none).
func (f *SageMaker) Domain(id string) Domain {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.dom.byID[id]; ok {
		c := *d
		c.SubnetIDs, c.Tags = slices.Clone(d.SubnetIDs), slices.Clone(d.Tags)
		c.UserSettings.SecurityGroups = slices.Clone(d.UserSettings.SecurityGroups)
		return c
	}
	return Domain{}
}

// Domains is how many domains exist (being deleted included).
func (f *SageMaker) Domains() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.dom.byID)
}
