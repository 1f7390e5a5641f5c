package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// apiClient talks to a portal's JSON API (/api/v1, internal/web/openapi.json)
// with a bearer token.
type apiClient struct {
	base, token string
	http        *http.Client
}

func newAPIClient(base, token string) *apiClient {
	return &apiClient{base: base, token: token, http: &http.Client{Timeout: 60 * time.Second}}
}

// apiConn is the API's Connection (the fields apply reads).
type apiConn struct {
	ID              int64  `json:"id"`
	Team            string `json:"team"`
	State           string `json:"state"`
	Amendment       string `json:"amendment"`
	CurrentVersion  int    `json:"current_version"`
	ApprovedVersion int    `json:"approved_version"`
	Links           struct {
		Self string `json:"self"`
		Page string `json:"page"`
	} `json:"links"`
}

// apiError is a request the portal refused, with its problem document.
type apiError struct {
	method, path string
	status       int
	title        string
	detail       string
	fields       []struct{ Field, Detail string }
}

func (e *apiError) Error() string {
	var b strings.Builder
	switch e.status {
	case http.StatusUnauthorized:
		fmt.Fprintf(&b, "the portal refused the token (401 %s: %s); check --token-file, or make a new token at /settings/tokens", e.title, e.detail)
	default:
		fmt.Fprintf(&b, "the portal refused %s %s: %d %s", e.method, e.path, e.status, e.title)
		if e.detail != "" {
			b.WriteString(": " + e.detail)
		}
	}
	for _, f := range e.fields {
		fmt.Fprintf(&b, "\n    field %s: %s", f.Field, f.Detail)
	}
	return b.String()
}

// do sends one request; a 2xx answer's JSON is decoded into out (a
// *[]byte takes the body as it is), anything else is an *apiError.
func (cl *apiClient) do(ctx context.Context, method, path string, body []byte, hdr map[string]string, out any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, cl.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &apiError{method: method, path: path, status: resp.StatusCode, title: http.StatusText(resp.StatusCode)}
		var p struct {
			Title, Detail string
			Errors        []struct{ Field, Detail string }
		}
		if json.Unmarshal(b, &p) == nil && p.Title != "" {
			e.title, e.detail, e.fields = p.Title, p.Detail, p.Errors
		}
		return resp.Header, e
	}
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = b
	default:
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: the answer is not the API's JSON: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

// remote is a connection of the portal as apply compares it: its
// connection, its current version's contract and ETag, and its approved
// version's hash.
type remote struct {
	conn         apiConn
	cur          workflow.Contract
	curHash      string
	approvedHash string
}

// remotesFor reads every connection of the files' teams the token sees,
// with its current version (and a live one's approved version's hash).
func (cl *apiClient) remotesFor(ctx context.Context, files []localContract) ([]remote, error) {
	teams := map[string]bool{}
	var out []remote
	for _, f := range files {
		if teams[f.c.Team] {
			continue
		}
		teams[f.c.Team] = true
		conns, err := cl.listTeam(ctx, f.c.Team)
		if err != nil {
			return nil, err
		}
		for _, c := range conns {
			r, err := cl.remoteOf(ctx, c)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// listTeam is every page of GET /api/v1/connections?team=.
func (cl *apiClient) listTeam(ctx context.Context, team string) ([]apiConn, error) {
	var all []apiConn
	next := "/api/v1/connections?limit=100&team=" + url.QueryEscape(team)
	for next != "" {
		var page struct {
			Items []apiConn `json:"items"`
			Next  string    `json:"next"`
		}
		if _, err := cl.do(ctx, http.MethodGet, next, nil, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		next = page.Next
	}
	return all, nil
}

func (cl *apiClient) remoteOf(ctx context.Context, c apiConn) (remote, error) {
	r := remote{conn: c}
	var raw []byte
	h, err := cl.do(ctx, http.MethodGet, fmt.Sprintf("%s/versions/%d", c.Links.Self, c.CurrentVersion), nil, nil, &raw)
	if err != nil {
		return r, err
	}
	if r.cur, err = workflow.DecodeContract(raw); err != nil {
		return r, fmt.Errorf("connection %d version %d: %w", c.ID, c.CurrentVersion, err)
	}
	r.curHash = h.Get("X-Contract-Hash")
	r.approvedHash = r.curHash
	if c.ApprovedVersion > 0 && c.ApprovedVersion != c.CurrentVersion {
		if h, err = cl.do(ctx, http.MethodGet, fmt.Sprintf("%s/versions/%d", c.Links.Self, c.ApprovedVersion), nil, nil, nil); err != nil {
			return r, err
		}
		r.approvedHash = h.Get("X-Contract-Hash")
	}
	return r, nil
}

// match finds the file's connection among the remotes: the one open (not
// rejected, withdrawn or revoked) connection of its identity, else the
// newest ended one (ended). Two open ones are an error: apply cannot
// choose.
func match(f localContract, remotes []remote) (open, ended *remote, err error) {
	key := contractKey(f.c)
	var ids []string
	for i := range remotes {
		r := &remotes[i]
		if contractKey(r.cur) != key {
			continue
		}
		if workflow.State(r.conn.State).Terminal() {
			if ended == nil || r.conn.ID > ended.conn.ID {
				ended = r
			}
			continue
		}
		open = r
		ids = append(ids, fmt.Sprintf("#%d", r.conn.ID))
	}
	if len(ids) > 1 {
		return nil, nil, fmt.Errorf("connections %s all are %s; apply cannot tell which one this file is: withdraw or revoke the others in the portal",
			strings.Join(ids, ", "), describeKey(f.c))
	}
	return open, ended, nil
}
