package awstest

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// EKS is the EKS endpoint: access entries, their access policies, and Pod
// Identity associations, on clusters a test registers with AddCluster. Fields
// below are settings a test changes with Set.
type EKS struct {
	*Core
	clusters map[string]*eksCluster // by name
	nextID   int

	// LoseCreateResponses makes the next n successful CreateAccessEntry or
	// CreatePodIdentityAssociation calls answer HTTP 500 after storing the
	// resource, as when a response is lost on the way back.
	LoseCreateResponses int
}

type eksCluster struct {
	authMode string
	// API server endpoint access (VpcConfigResponse).
	public, private bool
	publicCIDRs     []string
	entries         map[string]*AccessEntry // by principal ARN
	pods            map[string]*PodIdentity // by association id
	addons          map[string]*Addon       // by add-on name
}

// Addon is an installed EKS add-on, as DescribeAddon reports it.
type Addon struct {
	Name, Version       string
	Status              types.AddonStatus // default ACTIVE
	ConfigurationValues string            // JSON or YAML, as given to CreateAddon
}

// AccessEntry is a stored access entry.
type AccessEntry struct {
	Cluster, PrincipalARN, ARN string
	Type, Username             string
	KubernetesGroups           []string
	Tags                       map[string]string
	Created, Modified          time.Time

	policies map[string]*AssociatedPolicy // by policy ARN
}

// AssociatedPolicy is an access policy associated with an access entry.
type AssociatedPolicy struct {
	PolicyARN            string
	Scope                types.AccessScopeType
	Namespaces           []string
	Associated, Modified time.Time
}

// PodIdentity is a stored Pod Identity association.
type PodIdentity struct {
	Cluster, ID, ARN                   string
	Namespace, ServiceAccount, RoleARN string
	TargetRoleARN, Policy              string
	DisableSessionTags                 bool
	Tags                               map[string]string
	Created, Modified                  time.Time
}

// NewEKS starts an EKS endpoint with no clusters, closed when tb ends.
func NewEKS(tb testing.TB) *EKS {
	e := &EKS{Core: newCore(tb, "eks", false), clusters: map[string]*eksCluster{}}
	e.serveREST(e.routes())
	return e
}

// Set changes settings under the endpoint's lock.
func (e *EKS) Set(fn func(*EKS)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn(e)
}

// AddCluster registers a cluster, with authentication mode
// API_AND_CONFIG_MAP (access entries enabled) and EKS's default endpoint
// access: public to 0.0.0.0/0, private off (API_VpcConfigRequest.html:
// endpointPublicAccess defaults to true, endpointPrivateAccess to false,
// publicAccessCidrs to 0.0.0.0/0).
func (e *EKS) AddCluster(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clusters[name] = &eksCluster{authMode: "API_AND_CONFIG_MAP", public: true, publicCIDRs: []string{"0.0.0.0/0"}, entries: map[string]*AccessEntry{}, pods: map[string]*PodIdentity{}, addons: map[string]*Addon{}}
}

// SetAddon installs (or replaces) an add-on on a registered cluster.
func (e *EKS) SetAddon(cluster string, a Addon) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a.Status == "" {
		a.Status = types.AddonStatusActive
	}
	if c, ok := e.clusters[cluster]; ok {
		c.addons[a.Name] = &a
	}
}

// SetAuthenticationMode sets a registered cluster's authentication mode:
// API, API_AND_CONFIG_MAP, or CONFIG_MAP (access entry calls then fail with
// InvalidRequestException, as on a cluster that never enabled them).
func (e *EKS) SetAuthenticationMode(cluster, mode string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.clusters[cluster]; ok {
		c.authMode = mode
	}
}

// SetEndpointAccess sets a registered cluster's API server endpoint access.
// EKS refuses a cluster with neither public nor private access
// (config-cluster-endpoint.html: "You must enable private access to disable
// public access"), and so does this.
func (e *EKS) SetEndpointAccess(cluster string, public, private bool, publicCIDRs ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !public && !private {
		e.tb.Fatalf("awstest: EKS cluster %s: neither public nor private endpoint access", cluster)
	}
	if c, ok := e.clusters[cluster]; ok {
		c.public, c.private, c.publicCIDRs = public, private, publicCIDRs
		if public && len(publicCIDRs) == 0 {
			c.publicCIDRs = []string{"0.0.0.0/0"}
		}
	}
}

// Paths, methods and member names are the SDK's (schemas.go of
// service/eks v1.105.6); labels arrive escaped and are unescaped by the mux.
func (e *EKS) routes() []route {
	const (
		entries  = "/clusters/{clusterName}/access-entries"
		entry    = entries + "/{principalArn}"
		policies = entry + "/access-policies"
		pods     = "/clusters/{clusterName}/pod-identity-associations"
		pod      = pods + "/{associationId}"
	)
	return []route{
		{"POST " + entries, "CreateAccessEntry", e.createEntry},
		{"GET " + entries, "ListAccessEntries", e.listEntries},
		{"GET " + entry, "DescribeAccessEntry", e.describeEntry},
		{"POST " + entry, "UpdateAccessEntry", e.updateEntry},
		{"DELETE " + entry, "DeleteAccessEntry", e.deleteEntry},
		{"POST " + policies, "AssociateAccessPolicy", e.associatePolicy},
		{"GET " + policies, "ListAssociatedAccessPolicies", e.listPolicies},
		{"DELETE " + policies + "/{policyArn}", "DisassociateAccessPolicy", e.disassociatePolicy},
		{"POST " + pods, "CreatePodIdentityAssociation", e.createPod},
		{"GET " + pods, "ListPodIdentityAssociations", e.listPods},
		{"GET " + pod, "DescribePodIdentityAssociation", e.describePod},
		{"POST " + pod, "UpdatePodIdentityAssociation", e.updatePod},
		{"DELETE " + pod, "DeletePodIdentityAssociation", e.deletePod},
		{"GET /clusters/{clusterName}/addons/{addonName}", "DescribeAddon", e.describeAddon},
		{"GET /clusters/{clusterName}", "DescribeCluster", e.describeCluster},
	}
}

// describeAddon is DescribeAddon (GET /clusters/{name}/addons/{addonName},
// API_DescribeAddon.html): ClusterName and AddonName are required path
// labels (validators.go), the cluster name matches the cluster pattern, and
// an add-on not installed on the cluster (or no add-on of that name) is
// ResourceNotFoundException, as for a missing cluster.
func (e *EKS) describeAddon(r *http.Request, decode func(any) *Error) (any, *Error) {
	if _, _, err := eksQuery(r); err != nil {
		return nil, err
	}
	c, name, err := e.cluster(r)
	if err != nil {
		return nil, err
	}
	addon := r.PathValue("addonName")
	a, ok := c.addons[addon]
	if !ok {
		return nil, eksNotFound("No addon: %s found in cluster: %s", addon, name)
	}
	out := map[string]any{
		"addonName":    a.Name,
		"clusterName":  name,
		"status":       string(a.Status),
		"addonVersion": a.Version,
		"addonArn":     fmt.Sprintf("arn:aws:eks:%s:%s:addon/%s/%s/00000000-0000-0000-0000-000000000000", Region, Account, name, a.Name),
		"createdAt":    float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()),
		"modifiedAt":   float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()),
	}
	if a.ConfigurationValues != "" {
		out["configurationValues"] = a.ConfigurationValues
	}
	return map[string]any{"addon": out}, nil
}

// describeCluster is DescribeCluster (GET /clusters/{name}, here labelled
// clusterName as for the other operations so that e.cluster reads it;
// API_DescribeCluster.html): the members the portal reads (accessConfig,
// resourcesVpcConfig) and the cluster's identity; a cluster not registered
// is ResourceNotFoundException.
func (e *EKS) describeCluster(r *http.Request, decode func(any) *Error) (any, *Error) {
	if _, _, err := eksQuery(r); err != nil {
		return nil, err
	}
	c, name, err := e.cluster(r)
	if err != nil {
		return nil, err
	}
	vpc := map[string]any{
		"vpcId":                 ClusterVPC,
		"endpointPublicAccess":  c.public,
		"endpointPrivateAccess": c.private,
	}
	if c.public {
		vpc["publicAccessCidrs"] = c.publicCIDRs
	}
	return map[string]any{"cluster": map[string]any{
		"name":               name,
		"arn":                fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", Region, Account, name),
		"status":             "ACTIVE",
		"accessConfig":       map[string]any{"authenticationMode": c.authMode},
		"resourcesVpcConfig": vpc,
	}}, nil
}

// Request and response shapes, with the service's member names. Pointers
// tell a missing member from a zero one; a nil slice is a missing list.
type (
	eksEntryCreateIn struct {
		PrincipalArn       *string           `json:"principalArn"`
		KubernetesGroups   []string          `json:"kubernetesGroups"`
		Tags               map[string]string `json:"tags"`
		ClientRequestToken *string           `json:"clientRequestToken"`
		Username           *string           `json:"username"`
		Type               *string           `json:"type"`
	}
	eksEntryUpdateIn struct {
		KubernetesGroups   []string `json:"kubernetesGroups"`
		ClientRequestToken *string  `json:"clientRequestToken"`
		Username           *string  `json:"username"`
	}
	eksScope struct {
		Type       *string  `json:"type"`
		Namespaces []string `json:"namespaces"`
	}
	eksAssociateIn struct {
		PolicyArn   *string   `json:"policyArn"`
		AccessScope *eksScope `json:"accessScope"`
	}
	eksPodCreateIn struct {
		Namespace          *string           `json:"namespace"`
		ServiceAccount     *string           `json:"serviceAccount"`
		RoleArn            *string           `json:"roleArn"`
		ClientRequestToken *string           `json:"clientRequestToken"`
		Tags               map[string]string `json:"tags"`
		DisableSessionTags *bool             `json:"disableSessionTags"`
		TargetRoleArn      *string           `json:"targetRoleArn"`
		Policy             *string           `json:"policy"`
	}
	eksPodUpdateIn struct {
		RoleArn            *string `json:"roleArn"`
		ClientRequestToken *string `json:"clientRequestToken"`
		DisableSessionTags *bool   `json:"disableSessionTags"`
		TargetRoleArn      *string `json:"targetRoleArn"`
		Policy             *string `json:"policy"`
	}

	eksEntryOut struct {
		ClusterName      string            `json:"clusterName"`
		PrincipalArn     string            `json:"principalArn"`
		KubernetesGroups []string          `json:"kubernetesGroups"`
		AccessEntryArn   string            `json:"accessEntryArn"`
		CreatedAt        float64           `json:"createdAt"`
		ModifiedAt       float64           `json:"modifiedAt"`
		Tags             map[string]string `json:"tags,omitempty"`
		Username         string            `json:"username"`
		Type             string            `json:"type"`
	}
	eksScopeOut struct {
		Type       string   `json:"type"`
		Namespaces []string `json:"namespaces,omitempty"`
	}
	eksPolicyOut struct {
		PolicyArn    string      `json:"policyArn"`
		AccessScope  eksScopeOut `json:"accessScope"`
		AssociatedAt float64     `json:"associatedAt"`
		ModifiedAt   float64     `json:"modifiedAt"`
	}
	eksPodOut struct {
		ClusterName        string            `json:"clusterName"`
		Namespace          string            `json:"namespace"`
		ServiceAccount     string            `json:"serviceAccount"`
		RoleArn            string            `json:"roleArn"`
		AssociationArn     string            `json:"associationArn"`
		AssociationId      string            `json:"associationId"`
		Tags               map[string]string `json:"tags,omitempty"`
		CreatedAt          float64           `json:"createdAt"`
		ModifiedAt         float64           `json:"modifiedAt"`
		DisableSessionTags bool              `json:"disableSessionTags"`
		TargetRoleArn      string            `json:"targetRoleArn,omitempty"`
		ExternalId         string            `json:"externalId,omitempty"`
		Policy             string            `json:"policy,omitempty"`
	}
	eksPodSummaryOut struct {
		ClusterName    string `json:"clusterName"`
		Namespace      string `json:"namespace"`
		ServiceAccount string `json:"serviceAccount"`
		AssociationArn string `json:"associationArn"`
		AssociationId  string `json:"associationId"`
	}
)

var (
	eksClusterNamePattern = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)
	// IAM users and roles (with optional paths); not STS sessions, which
	// are temporary and cannot hold an access entry.
	eksPrincipalPattern = regexp.MustCompile(`^arn:aws[a-z\-]*:iam::[0-9]{12}:(role|user)/([\w+=,.@\-]+/)*([\w+=,.@\-]{1,128})$`)
	eksRolePattern      = regexp.MustCompile(`^arn:aws[a-z\-]*:iam::[0-9]{12}:role/([\w+=,.@\-]+/)*[\w+=,.@\-]{1,64}$`)
	eksPolicyPattern    = regexp.MustCompile(`^arn:aws[a-z\-]*:eks::aws:cluster-access-policy/[A-Za-z0-9]+$`)
	// A Kubernetes namespace (a DNS-1123 label); access scopes also take a
	// trailing "*" as a prefix wildcard.
	eksNamespacePattern      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	eksScopeNamespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$|^[a-z0-9][-a-z0-9]{0,61}\*$`)
	// A service account name (a DNS-1123 subdomain).
	eksServiceAccountPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	eksAssociationIDPattern  = regexp.MustCompile(`^a-[a-z0-9]{17}$`)
)

// eksAccessEntryTypes are CreateAccessEntry's type values. The SDK models type
// as a plain string, so they are the API reference's list.
var eksAccessEntryTypes = []string{"STANDARD", "FARGATE_LINUX", "EC2_LINUX", "EC2_WINDOWS", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX"}

func eksInvalid(format string, args ...any) *Error {
	return BadRequest("InvalidParameterException", format, args...)
}

func eksNotFound(format string, args ...any) *Error {
	return Errorf(http.StatusNotFound, "ResourceNotFoundException", format, args...)
}

func eksInUse(format string, args ...any) *Error {
	return Errorf(http.StatusConflict, "ResourceInUseException", format, args...)
}

// cluster returns the request's cluster; the caller holds mu.
func (e *EKS) cluster(r *http.Request) (*eksCluster, string, *Error) {
	name := r.PathValue("clusterName")
	if !eksClusterNamePattern.MatchString(name) {
		return nil, name, eksInvalid("The cluster name %q is not valid: it must match %s", name, eksClusterNamePattern)
	}
	c, ok := e.clusters[name]
	if !ok {
		return nil, name, eksNotFound("No cluster found for name: %s.", name)
	}
	return c, name, nil
}

// accessCluster is cluster for access entry operations, which need the
// cluster's authentication mode to include the EKS API.
func (e *EKS) accessCluster(r *http.Request) (*eksCluster, string, *Error) {
	c, name, err := e.cluster(r)
	if err == nil && c.authMode != "API" && c.authMode != "API_AND_CONFIG_MAP" {
		err = BadRequest("InvalidRequestException", "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation.")
	}
	return c, name, err
}

// entry returns the access entry named by the request's principalArn label.
func (e *EKS) entry(r *http.Request) (*AccessEntry, *eksCluster, *Error) {
	c, _, err := e.accessCluster(r)
	if err != nil {
		return nil, nil, err
	}
	p := r.PathValue("principalArn")
	if !eksPrincipalPattern.MatchString(p) {
		return nil, nil, eksInvalid("The principalArn parameter format is not valid: %q", p)
	}
	a, ok := c.entries[p]
	if !ok {
		return nil, nil, eksNotFound("The specified principalArn could not be found. You can view your available access entries with 'list-access-entries'.")
	}
	return a, c, nil
}

// eksQuery checks that the request has no query parameters but allowed, and
// parses maxResults (1-100, default 100).
func eksQuery(r *http.Request, allowed ...string) (url.Values, int, *Error) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(allowed, k) && k != "maxResults" && k != "nextToken" {
			return nil, 0, eksInvalid("unknown query parameter %q", k)
		}
	}
	max := 100
	if s := q.Get("maxResults"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return nil, 0, eksInvalid("maxResults %q is not in 1-100", s)
		}
		max = n
	}
	return q, max, nil
}

func eksCheckTags(tags map[string]string) *Error {
	if len(tags) > 50 {
		return eksInvalid("a resource can have at most 50 tags, got %d", len(tags))
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 || len(v) > 256 || strings.HasPrefix(strings.ToLower(k), "aws:") {
			return eksInvalid("tag %q=%q: keys are 1-128 characters and not aws:, values at most 256", k, v)
		}
	}
	return nil
}

func eksCheckGroups(groups []string) *Error {
	for _, g := range groups {
		if g == "" || len(g) > 256 {
			return eksInvalid("kubernetesGroups: a group name is 1-256 characters, got %q", g)
		}
		if strings.HasPrefix(g, "system:") {
			return eksInvalid("The kubernetes group name %s is invalid, it cannot start with system:", g)
		}
	}
	return nil
}

func (e *EKS) createEntry(r *http.Request, decode func(any) *Error) (any, *Error) {
	c, name, err := e.accessCluster(r)
	if err != nil {
		return nil, err
	}
	var in eksEntryCreateIn
	if err := decode(&in); err != nil {
		return nil, err
	}
	typ := "STANDARD"
	if in.Type != nil {
		typ = *in.Type
	}
	switch {
	case in.PrincipalArn == nil:
		return nil, eksInvalid("principalArn is required")
	case !eksPrincipalPattern.MatchString(*in.PrincipalArn):
		return nil, eksInvalid("The principalArn parameter format is not valid: %q is not an IAM user or role ARN", *in.PrincipalArn)
	case !slices.Contains(eksAccessEntryTypes, typ):
		return nil, eksInvalid("The type %q is not valid: it must be one of %v", typ, eksAccessEntryTypes)
	case typ != "STANDARD" && !strings.Contains(*in.PrincipalArn, ":role/"):
		return nil, eksInvalid("An access entry of type %s needs an IAM role principal", typ)
	case typ != "STANDARD" && (len(in.KubernetesGroups) > 0 || in.Username != nil):
		return nil, eksInvalid("kubernetesGroups and username can't be set for an access entry of type %s", typ)
	case in.Username != nil && (*in.Username == "" || eksReservedPrefix(*in.Username)):
		return nil, eksInvalid("The username %q is not valid: it cannot be empty or start with system:, eks:, aws:, amazon: or iam:", *in.Username)
	}
	if err := eksCheckGroups(in.KubernetesGroups); err != nil {
		return nil, err
	}
	if err := eksCheckTags(in.Tags); err != nil {
		return nil, err
	}
	if _, ok := c.entries[*in.PrincipalArn]; ok {
		return nil, eksInUse("The specified access entry resource is already in use on this cluster.")
	}
	e.nextID++
	now := time.Now()
	p := *in.PrincipalArn
	kind, rest, _ := strings.Cut(p[strings.LastIndex(p, ":")+1:], "/")
	short := rest[strings.LastIndex(rest, "/")+1:]
	a := &AccessEntry{
		Cluster: name, PrincipalARN: p, Type: typ,
		ARN: fmt.Sprintf("arn:aws:eks:%s:%s:access-entry/%s/%s/%s/%s/%08x-0000-4000-8000-%012x",
			Region, Account, name, kind, Account, short, e.nextID, e.nextID),
		KubernetesGroups: slices.Clone(in.KubernetesGroups), Tags: maps.Clone(in.Tags),
		policies: map[string]*AssociatedPolicy{}, Created: now, Modified: now,
	}
	switch {
	case in.Username != nil:
		a.Username = *in.Username
	case kind == "role":
		a.Username = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/{{SessionName}}", Account, short)
	default:
		a.Username = p
	}
	c.entries[p] = a
	e.event("created", "access-entry")
	if e.LoseCreateResponses > 0 {
		e.LoseCreateResponses--
		return nil, Errorf(http.StatusInternalServerError, "ServerException", "internal failure")
	}
	return map[string]any{"accessEntry": a.out()}, nil
}

func eksReservedPrefix(s string) bool {
	for _, p := range []string{"system:", "eks:", "aws:", "amazon:", "iam:"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func (a *AccessEntry) out() eksEntryOut {
	groups := a.KubernetesGroups
	if groups == nil {
		groups = []string{}
	}
	return eksEntryOut{
		ClusterName: a.Cluster, PrincipalArn: a.PrincipalARN, KubernetesGroups: groups,
		AccessEntryArn: a.ARN, CreatedAt: epoch(a.Created), ModifiedAt: epoch(a.Modified),
		Tags: a.Tags, Username: a.Username, Type: a.Type,
	}
}

func (e *EKS) describeEntry(r *http.Request, decode func(any) *Error) (any, *Error) {
	a, _, err := e.entry(r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"accessEntry": a.out()}, nil
}

func (e *EKS) updateEntry(r *http.Request, decode func(any) *Error) (any, *Error) {
	a, _, err := e.entry(r)
	if err != nil {
		return nil, err
	}
	var in eksEntryUpdateIn
	if err := decode(&in); err != nil {
		return nil, err
	}
	if a.Type != "STANDARD" && (in.KubernetesGroups != nil || in.Username != nil) {
		return nil, eksInvalid("kubernetesGroups and username can't be set for an access entry of type %s", a.Type)
	}
	if in.Username != nil && (*in.Username == "" || eksReservedPrefix(*in.Username)) {
		return nil, eksInvalid("The username %q is not valid", *in.Username)
	}
	if err := eksCheckGroups(in.KubernetesGroups); err != nil {
		return nil, err
	}
	if in.KubernetesGroups != nil { // an empty list clears them
		a.KubernetesGroups = slices.Clone(in.KubernetesGroups)
	}
	if in.Username != nil {
		a.Username = *in.Username
	}
	a.Modified = time.Now()
	e.event("updated", "access-entry")
	return map[string]any{"accessEntry": a.out()}, nil
}

// deleteEntry deletes the entry; its policy associations go with it, as in
// the service (they are not counted as disassociations).
func (e *EKS) deleteEntry(r *http.Request, decode func(any) *Error) (any, *Error) {
	a, c, err := e.entry(r)
	if err != nil {
		return nil, err
	}
	delete(c.entries, a.PrincipalARN)
	e.event("deleted", "access-entry")
	return map[string]any{}, nil
}

func (e *EKS) listEntries(r *http.Request, decode func(any) *Error) (any, *Error) {
	c, name, err := e.accessCluster(r)
	if err != nil {
		return nil, err
	}
	q, max, err := eksQuery(r, "associatedPolicyArn")
	if err != nil {
		return nil, err
	}
	pol := q.Get("associatedPolicyArn")
	if pol != "" && !eksPolicyPattern.MatchString(pol) {
		return nil, eksInvalid("The associatedPolicyArn parameter format is not valid: %q", pol)
	}
	var all []string
	for p, a := range c.entries {
		if _, ok := a.policies[pol]; pol == "" || ok {
			all = append(all, p)
		}
	}
	slices.Sort(all)
	start, end, next, err := window(len(all), max, q.Get("nextToken"), eksInvalid)
	if err != nil {
		return nil, err
	}
	res := map[string]any{"clusterName": name, "accessEntries": append([]string{}, all[start:end]...)}
	if next != "" {
		res["nextToken"] = next
	}
	return res, nil
}

func (e *EKS) associatePolicy(r *http.Request, decode func(any) *Error) (any, *Error) {
	a, _, err := e.entry(r)
	if err != nil {
		return nil, err
	}
	var in eksAssociateIn
	if err := decode(&in); err != nil {
		return nil, err
	}
	switch {
	case in.PolicyArn == nil || in.AccessScope == nil:
		return nil, eksInvalid("policyArn and accessScope are required")
	case !eksPolicyPattern.MatchString(*in.PolicyArn):
		return nil, eksInvalid("The policyArn parameter format is not valid: %q is not arn:aws:eks::aws:cluster-access-policy/<name>", *in.PolicyArn)
	case a.Type != "STANDARD":
		return nil, eksInvalid("Access policies can't be associated with an access entry of type %s", a.Type)
	}
	s := in.AccessScope
	switch {
	case s.Type == nil:
		return nil, eksInvalid("accessScope.type is required")
	case !Enum(s.Type, types.AccessScopeType("").Values()):
		return nil, eksInvalid("accessScope.type %q is not one of %v", *s.Type, types.AccessScopeType("").Values())
	case *s.Type == string(types.AccessScopeTypeNamespace) && len(s.Namespaces) == 0:
		return nil, eksInvalid("accessScope.namespaces must be specified for an access scope of type namespace")
	case *s.Type == string(types.AccessScopeTypeCluster) && len(s.Namespaces) > 0:
		return nil, eksInvalid("accessScope.namespaces can't be specified for an access scope of type cluster")
	}
	for _, ns := range s.Namespaces {
		if !eksScopeNamespacePattern.MatchString(ns) {
			return nil, eksInvalid("accessScope.namespaces: %q is not a Kubernetes namespace name (or a prefix ending in *)", ns)
		}
	}
	now := time.Now()
	// Associating a policy the entry already has replaces its scope.
	p, ok := a.policies[*in.PolicyArn]
	if ok {
		e.event("updated", "access-policy")
	} else {
		p = &AssociatedPolicy{PolicyARN: *in.PolicyArn, Associated: now}
		a.policies[p.PolicyARN] = p
		e.event("created", "access-policy")
	}
	p.Scope, p.Namespaces, p.Modified = types.AccessScopeType(*s.Type), slices.Clone(s.Namespaces), now
	return map[string]any{"clusterName": a.Cluster, "principalArn": a.PrincipalARN, "associatedAccessPolicy": p.out()}, nil
}

func (p *AssociatedPolicy) out() eksPolicyOut {
	return eksPolicyOut{
		PolicyArn:    p.PolicyARN,
		AccessScope:  eksScopeOut{Type: string(p.Scope), Namespaces: p.Namespaces},
		AssociatedAt: epoch(p.Associated), ModifiedAt: epoch(p.Modified),
	}
}

func (e *EKS) listPolicies(r *http.Request, decode func(any) *Error) (any, *Error) {
	a, _, err := e.entry(r)
	if err != nil {
		return nil, err
	}
	q, max, err := eksQuery(r)
	if err != nil {
		return nil, err
	}
	arns := slices.Sorted(maps.Keys(a.policies))
	start, end, next, err := window(len(arns), max, q.Get("nextToken"), eksInvalid)
	if err != nil {
		return nil, err
	}
	out := []eksPolicyOut{}
	for _, arn := range arns[start:end] {
		out = append(out, a.policies[arn].out())
	}
	res := map[string]any{"clusterName": a.Cluster, "principalArn": a.PrincipalARN, "associatedAccessPolicies": out}
	if next != "" {
		res["nextToken"] = next
	}
	return res, nil
}

func (e *EKS) disassociatePolicy(r *http.Request, decode func(any) *Error) (any, *Error) {
	a, _, err := e.entry(r)
	if err != nil {
		return nil, err
	}
	pol := r.PathValue("policyArn")
	if !eksPolicyPattern.MatchString(pol) {
		return nil, eksInvalid("The policyArn parameter format is not valid: %q", pol)
	}
	if _, ok := a.policies[pol]; !ok {
		return nil, eksNotFound("The access policy %s is not associated with the access entry.", pol)
	}
	delete(a.policies, pol)
	e.event("deleted", "access-policy")
	return map[string]any{}, nil
}

func eksCheckPodRoles(role, target *string, policy *string) *Error {
	if role != nil && !eksRolePattern.MatchString(*role) {
		return eksInvalid("The roleArn parameter format is not valid: %q is not an IAM role ARN", *role)
	}
	if target != nil && !eksRolePattern.MatchString(*target) {
		return eksInvalid("The targetRoleArn parameter format is not valid: %q is not an IAM role ARN", *target)
	}
	if policy != nil && len(*policy) > 2048 {
		return eksInvalid("policy is longer than 2048 characters")
	}
	return nil
}

func (e *EKS) createPod(r *http.Request, decode func(any) *Error) (any, *Error) {
	c, name, err := e.cluster(r)
	if err != nil {
		return nil, err
	}
	var in eksPodCreateIn
	if err := decode(&in); err != nil {
		return nil, err
	}
	switch {
	case in.Namespace == nil || in.ServiceAccount == nil || in.RoleArn == nil:
		return nil, eksInvalid("namespace, serviceAccount and roleArn are required")
	case !eksNamespacePattern.MatchString(*in.Namespace):
		return nil, eksInvalid("The namespace %q is not a valid Kubernetes namespace name", *in.Namespace)
	case !eksServiceAccountPattern.MatchString(*in.ServiceAccount):
		return nil, eksInvalid("The serviceAccount %q is not a valid Kubernetes service account name", *in.ServiceAccount)
	}
	if err := eksCheckPodRoles(in.RoleArn, in.TargetRoleArn, in.Policy); err != nil {
		return nil, err
	}
	if err := eksCheckTags(in.Tags); err != nil {
		return nil, err
	}
	for _, p := range c.pods {
		if p.Namespace == *in.Namespace && p.ServiceAccount == *in.ServiceAccount {
			return nil, eksInUse("Association already exists: %s", p.ID)
		}
	}
	e.nextID++
	id := fmt.Sprintf("a-%017d", e.nextID)
	now := time.Now()
	p := &PodIdentity{
		Cluster: name, ID: id, ARN: fmt.Sprintf("arn:aws:eks:%s:%s:podidentityassociation/%s/%s", Region, Account, name, id),
		Namespace: *in.Namespace, ServiceAccount: *in.ServiceAccount, RoleARN: *in.RoleArn,
		Tags: maps.Clone(in.Tags), Created: now, Modified: now,
	}
	p.apply(in.TargetRoleArn, in.Policy, in.DisableSessionTags)
	c.pods[id] = p
	e.event("created", "pod-identity")
	if e.LoseCreateResponses > 0 {
		e.LoseCreateResponses--
		return nil, Errorf(http.StatusInternalServerError, "ServerException", "internal failure")
	}
	return map[string]any{"association": p.out()}, nil
}

func (p *PodIdentity) apply(target, policy *string, disableTags *bool) {
	if target != nil {
		p.TargetRoleARN = *target
	}
	if policy != nil {
		p.Policy = *policy
	}
	if disableTags != nil {
		p.DisableSessionTags = *disableTags
	}
}

func (p *PodIdentity) out() eksPodOut {
	o := eksPodOut{
		ClusterName: p.Cluster, Namespace: p.Namespace, ServiceAccount: p.ServiceAccount, RoleArn: p.RoleARN,
		AssociationArn: p.ARN, AssociationId: p.ID, Tags: p.Tags,
		CreatedAt: epoch(p.Created), ModifiedAt: epoch(p.Modified),
		DisableSessionTags: p.DisableSessionTags, TargetRoleArn: p.TargetRoleARN, Policy: p.Policy,
	}
	if p.TargetRoleARN != "" {
		o.ExternalId = "ext-" + p.ID
	}
	return o
}

func (e *EKS) pod(r *http.Request) (*PodIdentity, *eksCluster, *Error) {
	c, name, err := e.cluster(r)
	if err != nil {
		return nil, nil, err
	}
	id := r.PathValue("associationId")
	if !eksAssociationIDPattern.MatchString(id) {
		return nil, nil, eksInvalid("The associationId %q is not valid", id)
	}
	p, ok := c.pods[id]
	if !ok {
		return nil, nil, eksNotFound("No Pod Identity association found for id %s in cluster %s.", id, name)
	}
	return p, c, nil
}

func (e *EKS) describePod(r *http.Request, decode func(any) *Error) (any, *Error) {
	p, _, err := e.pod(r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"association": p.out()}, nil
}

func (e *EKS) updatePod(r *http.Request, decode func(any) *Error) (any, *Error) {
	p, _, err := e.pod(r)
	if err != nil {
		return nil, err
	}
	var in eksPodUpdateIn
	if err := decode(&in); err != nil {
		return nil, err
	}
	// "In an update, you can change the IAM role, the target IAM role, or
	// disableSessionTags. You must change at least one of these in an
	// update." (API_UpdatePodIdentityAssociation,
	// https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdatePodIdentityAssociation.html)
	if in.RoleArn == nil && in.TargetRoleArn == nil && in.DisableSessionTags == nil && in.Policy == nil {
		return nil, eksInvalid("an update must change at least one of roleArn, targetRoleArn, disableSessionTags or policy")
	}
	if err := eksCheckPodRoles(in.RoleArn, in.TargetRoleArn, in.Policy); err != nil {
		return nil, err
	}
	if in.RoleArn != nil {
		p.RoleARN = *in.RoleArn
	}
	p.apply(in.TargetRoleArn, in.Policy, in.DisableSessionTags)
	p.Modified = time.Now()
	e.event("updated", "pod-identity")
	return map[string]any{"association": p.out()}, nil
}

func (e *EKS) deletePod(r *http.Request, decode func(any) *Error) (any, *Error) {
	p, c, err := e.pod(r)
	if err != nil {
		return nil, err
	}
	delete(c.pods, p.ID)
	e.event("deleted", "pod-identity")
	return map[string]any{"association": p.out()}, nil
}

func (e *EKS) listPods(r *http.Request, decode func(any) *Error) (any, *Error) {
	c, _, err := e.cluster(r)
	if err != nil {
		return nil, err
	}
	q, max, err := eksQuery(r, "namespace", "serviceAccount")
	if err != nil {
		return nil, err
	}
	ns, sa := q.Get("namespace"), q.Get("serviceAccount")
	var all []*PodIdentity
	for _, p := range c.pods {
		if (ns == "" || p.Namespace == ns) && (sa == "" || p.ServiceAccount == sa) {
			all = append(all, p)
		}
	}
	slices.SortFunc(all, func(a, b *PodIdentity) int { return strings.Compare(a.ID, b.ID) })
	start, end, next, err := window(len(all), max, q.Get("nextToken"), eksInvalid)
	if err != nil {
		return nil, err
	}
	out := []eksPodSummaryOut{}
	for _, p := range all[start:end] {
		out = append(out, eksPodSummaryOut{ClusterName: p.Cluster, Namespace: p.Namespace, ServiceAccount: p.ServiceAccount, AssociationArn: p.ARN, AssociationId: p.ID})
	}
	res := map[string]any{"associations": out}
	if next != "" {
		res["nextToken"] = next
	}
	return res, nil
}

// AccessEntry is a copy of the cluster's access entry for principal (zero
// when there is none).
func (e *EKS) AccessEntry(cluster, principal string) AccessEntry {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.clusters[cluster]
	if !ok || c.entries[principal] == nil {
		return AccessEntry{}
	}
	a := *c.entries[principal]
	a.KubernetesGroups, a.Tags, a.policies = slices.Clone(a.KubernetesGroups), maps.Clone(a.Tags), nil
	return a
}

// AccessEntries is how many access entries the cluster has.
func (e *EKS) AccessEntries(cluster string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.clusters[cluster]; ok {
		return len(c.entries)
	}
	return 0
}

// Policies is a copy of the policies associated with the cluster's access
// entry for principal, by policy ARN.
func (e *EKS) Policies(cluster, principal string) []AssociatedPolicy {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.clusters[cluster]
	if !ok || c.entries[principal] == nil {
		return nil
	}
	var out []AssociatedPolicy
	for _, arn := range slices.Sorted(maps.Keys(c.entries[principal].policies)) {
		p := *c.entries[principal].policies[arn]
		p.Namespaces = slices.Clone(p.Namespaces)
		out = append(out, p)
	}
	return out
}

// PodIdentities is a copy of the cluster's Pod Identity associations, by
// namespace and service account.
func (e *EKS) PodIdentities(cluster string) []PodIdentity {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.clusters[cluster]
	if !ok {
		return nil
	}
	var out []PodIdentity
	for _, p := range c.pods {
		cp := *p
		cp.Tags = maps.Clone(p.Tags)
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b PodIdentity) int {
		return strings.Compare(a.Namespace+"/"+a.ServiceAccount, b.Namespace+"/"+b.ServiceAccount)
	})
	return out
}
