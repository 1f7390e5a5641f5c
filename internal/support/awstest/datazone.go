package awstest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/datazone/types"
)

// DataZone is the DataZone endpoint (SageMaker Unified Studio): the
// environments of a project, and connections in them. Domains, projects and
// environments are not created through the API here: a test adds them with
// AddDomain, AddProject and AddEnvironment. Fields below are settings a test
// changes with Set.
//
// Routes, members and shapes are those of aws-sdk-go-v2/service/datazone
// v1.62.2 (restJson1, signing name "datazone", no host prefix), so a client
// with BaseEndpoint set to URL reaches it unchanged.
type DataZone struct {
	*Core
	domains map[string]*dzDomain
	nextID  int

	// LoseCreateResponses makes the next n successful creates answer HTTP 500
	// after storing the connection, as when a response is lost on the way
	// back.
	LoseCreateResponses int
	// IgnoreClientTokens makes the endpoint forget CreateConnection's
	// clientToken: a create retried by the SDK with the same token then
	// answers ConflictException (the name is taken) instead of the
	// connection it made. The service documents the token as making the
	// request idempotent; this is for testing a caller that must not rely
	// on it.
	IgnoreClientTokens bool
}

type dzDomain struct {
	id, unitID string
	projects   map[string]bool
	envs       map[string]*Environment
	conns      map[string]*Connection
}

// Environment is a stored DataZone environment.
type Environment struct {
	ID, DomainID, ProjectID, Name, Status string
	Created                               time.Time
}

// Connection is a stored DataZone connection.
type Connection struct {
	ID, DomainID, ProjectID, EnvironmentID, Name, Description, ClusterName string
	// ClientToken is the token the create carried.
	ClientToken string
	Created     time.Time
}

// NewDataZone starts a DataZone endpoint, closed when tb ends.
func NewDataZone(tb testing.TB) *DataZone {
	f := &DataZone{Core: newCore(tb, "datazone", false), domains: map[string]*dzDomain{}}
	f.serveREST(f.routes())
	return f
}

// Set changes settings under the endpoint's lock.
func (f *DataZone) Set(fn func(*DataZone)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// Identifier patterns and limits of the DataZone API reference.
var (
	dzDomainPattern = regexp.MustCompile(`^dzd[-_][a-zA-Z0-9_-]{1,36}$`)
	dzIDPattern     = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,36}$`) // projects, environments
	// HyperPod's cluster name pattern (SageMaker CreateCluster).
	dzClusterPattern = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
)

const (
	dzMaxName        = 64
	dzMaxDescription = 128
	dzMaxIdentifier  = 128 // a connection identifier in a path
)

// AddDomain adds a domain. id must match the service's domain id pattern.
func (f *DataZone) AddDomain(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !dzDomainPattern.MatchString(id) {
		f.tb.Fatalf("awstest: DataZone domain id %q does not match %s", id, dzDomainPattern)
	}
	if _, ok := f.domains[id]; ok {
		f.tb.Fatalf("awstest: DataZone domain %s added twice", id)
	}
	f.domains[id] = &dzDomain{
		id: id, unitID: "du" + hash(id)[:12],
		projects: map[string]bool{}, envs: map[string]*Environment{}, conns: map[string]*Connection{},
	}
}

// AddProject adds a project to a domain added before.
func (f *DataZone) AddProject(domainID, projectID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.mustDomain(domainID)
	if !dzIDPattern.MatchString(projectID) || d.projects[projectID] {
		f.tb.Fatalf("awstest: DataZone project id %q is invalid or added twice", projectID)
	}
	d.projects[projectID] = true
}

// AddEnvironment adds an ACTIVE environment to a project added before.
func (f *DataZone) AddEnvironment(domainID, projectID, environmentID, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.mustDomain(domainID)
	if !d.projects[projectID] {
		f.tb.Fatalf("awstest: DataZone project %s is not in domain %s", projectID, domainID)
	}
	if !dzIDPattern.MatchString(environmentID) || d.envs[environmentID] != nil || name == "" {
		f.tb.Fatalf("awstest: DataZone environment %q (%q) is invalid or added twice", environmentID, name)
	}
	d.envs[environmentID] = &Environment{
		ID: environmentID, DomainID: domainID, ProjectID: projectID, Name: name,
		Status: string(types.EnvironmentStatusActive), Created: time.Now(),
	}
}

// SetEnvironmentStatus changes an environment's status to one of the
// service's EnvironmentStatus values.
func (f *DataZone) SetEnvironmentStatus(domainID, environmentID string, status types.EnvironmentStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.mustDomain(domainID).envs[environmentID]
	if e == nil || !slices.Contains(status.Values(), status) {
		f.tb.Fatalf("awstest: DataZone environment %s: no such environment, or status %q is not valid", environmentID, status)
	}
	e.Status = string(status)
}

func (f *DataZone) mustDomain(id string) *dzDomain {
	d := f.domains[id]
	if d == nil {
		f.tb.Fatalf("awstest: DataZone domain %s was not added", id)
	}
	return d
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (f *DataZone) routes() []route {
	const conns = "/v2/domains/{domainIdentifier}/connections"
	return []route{
		{"GET /v2/domains/{domainIdentifier}/environments", "ListEnvironments", f.listEnvironments},
		{"POST " + conns, "CreateConnection", f.createConnection},
		{"GET " + conns, "ListConnections", f.listConnections},
		{"GET " + conns + "/{identifier}", "GetConnection", f.getConnection},
		{"PATCH " + conns + "/{identifier}", "UpdateConnection", f.updateConnection},
		{"DELETE " + conns + "/{identifier}", "DeleteConnection", f.deleteConnection},
	}
}

// Response shapes, with the service's member names.
type (
	dzEnvironmentOut struct {
		ID        string `json:"id"`
		DomainID  string `json:"domainId"`
		ProjectID string `json:"projectId"`
		Name      string `json:"name"`
		Provider  string `json:"provider"`
		CreatedBy string `json:"createdBy"`
		Status    string `json:"status"`
		CreatedAt string `json:"createdAt"`
		AccountID string `json:"awsAccountId"`
		Region    string `json:"awsAccountRegion"`
	}
	dzHyperPodOut struct {
		ClusterName  string `json:"clusterName"`
		ClusterArn   string `json:"clusterArn"`
		Orchestrator string `json:"orchestrator"`
	}
	dzPropsOut struct {
		HyperPod dzHyperPodOut `json:"hyperPodProperties"`
	}
	// dzConnectionOut is a ConnectionSummary; Description is set only in
	// the answers of Create, Get and Update, which have that member.
	dzConnectionOut struct {
		ConnectionID      string     `json:"connectionId"`
		DomainID          string     `json:"domainId"`
		DomainUnitID      string     `json:"domainUnitId"`
		EnvironmentID     string     `json:"environmentId"`
		ProjectID         string     `json:"projectId"`
		Name              string     `json:"name"`
		Description       *string    `json:"description,omitempty"`
		PhysicalEndpoints []struct{} `json:"physicalEndpoints"`
		Props             dzPropsOut `json:"props"`
		Scope             string     `json:"scope"`
		Type              string     `json:"type"`
	}
	dzCreateIn struct {
		AwsLocation                      json.RawMessage            `json:"awsLocation"`
		ClientToken                      *string                    `json:"clientToken"`
		Configurations                   json.RawMessage            `json:"configurations"`
		Description                      *string                    `json:"description"`
		EnableTrustedIdentityPropagation *bool                      `json:"enableTrustedIdentityPropagation"`
		EnvironmentIdentifier            *string                    `json:"environmentIdentifier"`
		Name                             *string                    `json:"name"`
		Props                            map[string]json.RawMessage `json:"props"`
		Scope                            *string                    `json:"scope"`
	}
	dzUpdateIn struct {
		AwsLocation    json.RawMessage `json:"awsLocation"`
		Configurations json.RawMessage `json:"configurations"`
		Description    *string         `json:"description"`
		Props          json.RawMessage `json:"props"`
	}
)

// strictBody decodes a JSON body into v, refusing members not named exactly
// as in allowed (encoding/json alone matches names case-insensitively).
func strictBody(decode func(any) *Error, v any, allowed ...string) *Error {
	var raw map[string]json.RawMessage
	if e := decode(&raw); e != nil {
		return e
	}
	for k := range raw {
		if !slices.Contains(allowed, k) {
			return BadRequest("SerializationException", "unknown member %q", k)
		}
	}
	return decode(v)
}

// noBody refuses a body on an operation that has none.
func noBody(decode func(any) *Error) *Error { return decode(&struct{}{}) }

// query returns the request's query, refusing parameters not in allowed and
// repeated ones.
func query(r *http.Request, allowed ...string) (url.Values, *Error) {
	q := r.URL.Query()
	for k, v := range q {
		if !slices.Contains(allowed, k) {
			return nil, Validation("unknown query parameter %q", k)
		}
		if len(v) != 1 {
			return nil, Validation("query parameter %q is repeated", k)
		}
	}
	return q, nil
}

// checkScope refuses a request not signed for DataZone in the test region.
func checkScope(r *http.Request) *Error {
	if !strings.Contains(r.Header.Get("Authorization"), "/"+Region+"/datazone/aws4_request") {
		return BadRequest("InvalidSignatureException", "request is not signed for datazone in %s", Region)
	}
	return nil
}

// domain checks the request's signature scope and returns the domain named
// in its path.
func (f *DataZone) domain(r *http.Request) (*dzDomain, *Error) {
	if e := checkScope(r); e != nil {
		return nil, e
	}
	id := r.PathValue("domainIdentifier")
	if !dzDomainPattern.MatchString(id) {
		return nil, Validation("Value '%s' at 'domainIdentifier' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", id, dzDomainPattern)
	}
	d := f.domains[id]
	if d == nil {
		return nil, Errorf(http.StatusNotFound, "ResourceNotFoundException", "Domain %s not found.", id)
	}
	return d, nil
}

// project checks a project identifier and that the project is in d.
func (d *dzDomain) project(id string) *Error {
	if !dzIDPattern.MatchString(id) {
		return Validation("Value '%s' at 'projectIdentifier' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", id, dzIDPattern)
	}
	if !d.projects[id] {
		return Errorf(http.StatusNotFound, "ResourceNotFoundException", "Project %s not found in domain %s.", id, d.id)
	}
	return nil
}

// page parses maxResults (1-50; absent: def) and nextToken, and returns the
// window [start, end) of n items and the next token ("" at the end).
func page(q url.Values, n, def int) (start, end int, next string, e *Error) {
	max := def
	if v, ok := q["maxResults"]; ok {
		m, err := strconv.Atoi(v[0])
		if err != nil || m < 1 || m > 50 {
			return 0, 0, "", Validation("maxResults %q is not in 1-50", v[0])
		}
		max = m
	}
	return window(n, max, q.Get("nextToken"), Validation)
}

func (f *DataZone) listEnvironments(r *http.Request, decode func(any) *Error) (any, *Error) {
	if e := noBody(decode); e != nil {
		return nil, e
	}
	d, e := f.domain(r)
	if e != nil {
		return nil, e
	}
	q, e := query(r, "awsAccountId", "awsAccountRegion", "environmentBlueprintIdentifier", "environmentProfileIdentifier",
		"maxResults", "name", "nextToken", "projectIdentifier", "provider", "status")
	if e != nil {
		return nil, e
	}
	if _, ok := q["projectIdentifier"]; !ok {
		return nil, Validation("projectIdentifier is required")
	}
	if e := d.project(q.Get("projectIdentifier")); e != nil {
		return nil, e
	}
	if s, ok := q["status"]; ok && !Enum(&s[0], types.EnvironmentStatus("").Values()) {
		return nil, Validation("status %q is not one of %v", s[0], types.EnvironmentStatus("").Values())
	}
	var all []dzEnvironmentOut
	for _, env := range d.envs {
		if env.ProjectID != q.Get("projectIdentifier") ||
			q.Has("status") && env.Status != q.Get("status") ||
			q.Has("name") && env.Name != q.Get("name") {
			continue
		}
		all = append(all, dzEnvironmentOut{
			ID: env.ID, DomainID: d.id, ProjectID: env.ProjectID, Name: env.Name, Provider: "Amazon SageMaker",
			CreatedBy: "portal", Status: env.Status, CreatedAt: env.Created.UTC().Format(time.RFC3339Nano),
			AccountID: Account, Region: Region,
		})
	}
	slices.SortFunc(all, func(a, b dzEnvironmentOut) int { return strings.Compare(a.ID, b.ID) })
	start, end, next, e := page(q, len(all), 50)
	if e != nil {
		return nil, e
	}
	res := map[string]any{"items": append([]dzEnvironmentOut{}, all[start:end]...)}
	if next != "" {
		res["nextToken"] = next
	}
	return res, nil
}

func (c *Connection) out(withDescription bool) dzConnectionOut {
	o := dzConnectionOut{
		ConnectionID: c.ID, DomainID: c.DomainID, EnvironmentID: c.EnvironmentID, ProjectID: c.ProjectID,
		Name: c.Name, PhysicalEndpoints: []struct{}{},
		Props: dzPropsOut{HyperPod: dzHyperPodOut{
			ClusterName:  c.ClusterName,
			ClusterArn:   "arn:aws:sagemaker:" + Region + ":" + Account + ":cluster/" + hash(c.ClusterName)[:12],
			Orchestrator: string(types.HyperPodOrchestratorEks),
		}},
		Scope: string(types.ConnectionScopeProject), Type: string(types.ConnectionTypeHyperpod),
	}
	if withDescription && c.Description != "" {
		o.Description = &c.Description
	}
	return o
}

func (f *DataZone) connOut(d *dzDomain, c *Connection, withDescription bool) dzConnectionOut {
	o := c.out(withDescription)
	o.DomainUnitID = d.unitID
	return o
}

// hyperPodProps checks a ConnectionPropertiesInput union and returns its
// HyperPod cluster name: the only member this endpoint serves.
func hyperPodProps(props map[string]json.RawMessage) (string, *Error) {
	if len(props) != 1 {
		return "", Validation("props must set exactly one member, not %d", len(props))
	}
	raw, ok := props["hyperPodProperties"]
	if !ok {
		for k := range props {
			return "", Validation("props member %q is not served by this test endpoint (only hyperPodProperties)", k)
		}
	}
	var hp map[string]*string
	if err := json.Unmarshal(raw, &hp); err != nil {
		return "", BadRequest("SerializationException", "hyperPodProperties: %v", err)
	}
	for k := range hp {
		if k != "clusterName" {
			return "", BadRequest("SerializationException", "hyperPodProperties: unknown member %q", k)
		}
	}
	name := hp["clusterName"]
	if name == nil {
		return "", Validation("hyperPodProperties.clusterName is required")
	}
	if !dzClusterPattern.MatchString(*name) {
		return "", Validation("Value '%s' at 'props.hyperPodProperties.clusterName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *name, dzClusterPattern)
	}
	return *name, nil
}

func checkDescription(d *string, minLen int) *Error {
	if d != nil && (len(*d) < minLen || len(*d) > dzMaxDescription) {
		return Validation("description must be %d-%d characters long, not %d", minLen, dzMaxDescription, len(*d))
	}
	return nil
}

func (f *DataZone) createConnection(r *http.Request, decode func(any) *Error) (any, *Error) {
	d, e := f.domain(r)
	if e != nil {
		return nil, e
	}
	if _, e := query(r); e != nil {
		return nil, e
	}
	var in dzCreateIn
	if e := strictBody(decode, &in, "awsLocation", "clientToken", "configurations", "description",
		"enableTrustedIdentityPropagation", "environmentIdentifier", "name", "props", "scope"); e != nil {
		return nil, e
	}
	switch {
	case in.Name == nil:
		return nil, Validation("name is required")
	case *in.Name == "" || len(*in.Name) > dzMaxName:
		return nil, Validation("name must be 1-%d characters long", dzMaxName)
	case in.Props == nil:
		return nil, Validation("props is required for a HyperPod connection")
	case in.Scope != nil && *in.Scope != string(types.ConnectionScopeProject):
		return nil, Validation("scope %q is not served by this test endpoint (only PROJECT, through an environment)", *in.Scope)
	case in.EnvironmentIdentifier == nil:
		return nil, Validation("environmentIdentifier is required for a project's HyperPod connection")
	case !dzIDPattern.MatchString(*in.EnvironmentIdentifier):
		return nil, Validation("Value '%s' at 'environmentIdentifier' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *in.EnvironmentIdentifier, dzIDPattern)
	case in.AwsLocation != nil || in.Configurations != nil || in.EnableTrustedIdentityPropagation != nil:
		return nil, Validation("awsLocation, configurations and enableTrustedIdentityPropagation are not served by this test endpoint")
	}
	if e := checkDescription(in.Description, 0); e != nil {
		return nil, e
	}
	cluster, e := hyperPodProps(in.Props)
	if e != nil {
		return nil, e
	}
	env := d.envs[*in.EnvironmentIdentifier]
	if env == nil {
		return nil, Errorf(http.StatusNotFound, "ResourceNotFoundException", "Environment %s not found in domain %s.", *in.EnvironmentIdentifier, d.id)
	}
	if env.Status != string(types.EnvironmentStatusActive) {
		return nil, Validation("Environment %s is %s, not ACTIVE.", env.ID, env.Status)
	}
	token := ""
	if in.ClientToken != nil && !f.IgnoreClientTokens {
		token = *in.ClientToken
	}
	for _, c := range d.conns {
		if token != "" && c.ClientToken == token {
			if c.Name != *in.Name || c.EnvironmentID != env.ID || c.ClusterName != cluster {
				return nil, Errorf(http.StatusConflict, "ConflictException", "clientToken %s was used for another request", token)
			}
			return f.connOut(d, c, true), nil // the same request again: its answer again
		}
	}
	for _, c := range d.conns {
		if c.ProjectID == env.ProjectID && c.Name == *in.Name {
			return nil, Errorf(http.StatusConflict, "ConflictException", "Connection with name %s already exists in project %s.", c.Name, c.ProjectID)
		}
	}
	f.nextID++
	c := &Connection{
		ID: fmt.Sprintf("c%013d", f.nextID), DomainID: d.id, ProjectID: env.ProjectID, EnvironmentID: env.ID,
		Name: *in.Name, ClusterName: cluster, ClientToken: token, Created: time.Now(),
	}
	if in.Description != nil {
		c.Description = *in.Description
	}
	d.conns[c.ID] = c
	f.event("created", "datazone-connection")
	if f.LoseCreateResponses > 0 {
		f.LoseCreateResponses--
		return nil, Errorf(http.StatusInternalServerError, "InternalServerException", "internal failure")
	}
	return f.connOut(d, c, true), nil
}

func (f *DataZone) listConnections(r *http.Request, decode func(any) *Error) (any, *Error) {
	if e := noBody(decode); e != nil {
		return nil, e
	}
	d, e := f.domain(r)
	if e != nil {
		return nil, e
	}
	q, e := query(r, "environmentIdentifier", "maxResults", "name", "nextToken", "projectIdentifier",
		"scope", "sortBy", "sortOrder", "type")
	if e != nil {
		return nil, e
	}
	if q.Has("projectIdentifier") {
		if e := d.project(q.Get("projectIdentifier")); e != nil {
			return nil, e
		}
	}
	if q.Has("environmentIdentifier") && !dzIDPattern.MatchString(q.Get("environmentIdentifier")) {
		return nil, Validation("environmentIdentifier %q does not match %s", q.Get("environmentIdentifier"), dzIDPattern)
	}
	if q.Has("name") && len(q.Get("name")) > dzMaxName {
		return nil, Validation("name is longer than %d characters", dzMaxName)
	}
	for k, values := range map[string][]string{
		"type":      enumStrings(types.ConnectionType("").Values()),
		"scope":     enumStrings(types.ConnectionScope("").Values()),
		"sortBy":    enumStrings(types.SortFieldConnection("").Values()),
		"sortOrder": enumStrings(types.SortOrder("").Values()),
	} {
		if v, ok := q[k]; ok && !slices.Contains(values, v[0]) {
			return nil, Validation("%s %q is not one of %v", k, v[0], values)
		}
	}
	var all []*Connection
	for _, c := range d.conns {
		// The service does not document how name filters; matching any
		// connection whose name contains it makes the caller compare
		// names exactly, whichever it is.
		if q.Has("projectIdentifier") && c.ProjectID != q.Get("projectIdentifier") ||
			q.Has("environmentIdentifier") && c.EnvironmentID != q.Get("environmentIdentifier") ||
			q.Has("name") && !strings.Contains(c.Name, q.Get("name")) ||
			q.Has("type") && q.Get("type") != string(types.ConnectionTypeHyperpod) ||
			q.Has("scope") && q.Get("scope") != string(types.ConnectionScopeProject) {
			continue
		}
		all = append(all, c)
	}
	slices.SortFunc(all, func(a, b *Connection) int { return strings.Compare(a.Name+"\x00"+a.ID, b.Name+"\x00"+b.ID) })
	if q.Get("sortOrder") == string(types.SortOrderDescending) {
		slices.Reverse(all)
	}
	start, end, next, e := page(q, len(all), 50)
	if e != nil {
		return nil, e
	}
	items := make([]dzConnectionOut, 0, end-start)
	for _, c := range all[start:end] {
		items = append(items, f.connOut(d, c, false))
	}
	res := map[string]any{"items": items}
	if next != "" {
		res["nextToken"] = next
	}
	return res, nil
}

// connection returns the connection named by the request's path.
func (f *DataZone) connection(r *http.Request) (*dzDomain, *Connection, *Error) {
	d, e := f.domain(r)
	if e != nil {
		return nil, nil, e
	}
	id := r.PathValue("identifier")
	if id == "" || len(id) > dzMaxIdentifier {
		return nil, nil, Validation("identifier must be 1-%d characters long", dzMaxIdentifier)
	}
	c := d.conns[id]
	if c == nil {
		return nil, nil, Errorf(http.StatusNotFound, "ResourceNotFoundException", "Connection %s not found in domain %s.", id, d.id)
	}
	return d, c, nil
}

func (f *DataZone) getConnection(r *http.Request, decode func(any) *Error) (any, *Error) {
	if e := noBody(decode); e != nil {
		return nil, e
	}
	q, e := query(r, "withSecret")
	if e != nil {
		return nil, e
	}
	if v, ok := q["withSecret"]; ok && v[0] != "true" && v[0] != "false" {
		return nil, Validation("withSecret %q is not a boolean", v[0])
	}
	d, c, e := f.connection(r)
	if e != nil {
		return nil, e
	}
	return f.connOut(d, c, true), nil
}

func (f *DataZone) updateConnection(r *http.Request, decode func(any) *Error) (any, *Error) {
	if _, e := query(r); e != nil {
		return nil, e
	}
	var in dzUpdateIn
	if e := strictBody(decode, &in, "awsLocation", "configurations", "description", "props"); e != nil {
		return nil, e
	}
	d, c, e := f.connection(r)
	if e != nil {
		return nil, e
	}
	switch {
	case in.Props != nil:
		// ConnectionPropertiesPatch has no HyperPod member: a HyperPod
		// connection's cluster cannot be changed.
		return nil, Validation("props cannot be patched on a %s connection", types.ConnectionTypeHyperpod)
	case in.AwsLocation != nil || in.Configurations != nil:
		return nil, Validation("awsLocation and configurations are not served by this test endpoint")
	}
	if e := checkDescription(in.Description, 1); e != nil {
		return nil, e
	}
	if in.Description != nil {
		c.Description = *in.Description
		f.event("updated", "datazone-connection")
	}
	return f.connOut(d, c, true), nil
}

func (f *DataZone) deleteConnection(r *http.Request, decode func(any) *Error) (any, *Error) {
	if e := noBody(decode); e != nil {
		return nil, e
	}
	if _, e := query(r); e != nil {
		return nil, e
	}
	d, c, e := f.connection(r)
	if e != nil {
		return nil, e
	}
	delete(d.conns, c.ID)
	f.event("deleted", "datazone-connection")
	return map[string]string{"status": "DELETED"}, nil
}

func enumStrings[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// Connection is a copy of the stored connection id in domainID (zero when
// there is none).
func (f *DataZone) Connection(domainID, id string) Connection {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.domains[domainID]; d != nil && d.conns[id] != nil {
		return *d.conns[id]
	}
	return Connection{}
}

// Connections is a copy of every stored connection, by domain, project and
// name.
func (f *DataZone) Connections() []Connection {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Connection
	for _, d := range f.domains {
		for _, c := range d.conns {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, func(a, b Connection) int {
		return strings.Compare(a.DomainID+"\x00"+a.ProjectID+"\x00"+a.Name, b.DomainID+"\x00"+b.ProjectID+"\x00"+b.Name)
	})
	return out
}
