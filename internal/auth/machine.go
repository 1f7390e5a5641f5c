package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Machine identities (issue 37): a pipeline presents a token the
// organisation's identity provider issued to it (an OAuth 2.0
// client-credentials token, or a workload token the provider issued in
// exchange for the pipeline's own), signed by the provider's keys, for one
// of the audiences the portal is configured with (serve
// --machine-audiences). The groups file names each machine the portal
// accepts, by the token's `sub` claim, and gives it its groups:
//
//	machines:
//	  ci-red:                      # the machine's name: the audit trail's actor is machine:ci-red
//	    subject: 0oa8f2k1ci-red    # the token's sub claim, exactly
//	    scope: read-write          # read (default) or read-write, as a personal token's scope
//	    groups: [team-red-owners]  # the groups it acts with, mapped as a person's are
//
// A machine acts with exactly those groups, resolved by the file's roles
// and teams like a person's, never with a groups claim of the token, and
// with its scope as a personal access token's (workflow.TokenPermits): it
// never decides. A token whose sub is not in the file is refused, so a
// person's token issued for the same audience is no machine.

// Machine is one machine identity of the groups file.
type Machine struct {
	Subject string              `json:"subject"`
	Scope   workflow.TokenScope `json:"scope,omitempty"`
	Groups  []string            `json:"groups"`
}

// MachinePrefix begins a machine identity's name where the portal shows
// it (the audit trail's actor, its user record's subject).
const MachinePrefix = "machine:"

var machineNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// checkMachines validates the machines section: names, unique subjects,
// a scope that never decides, and groups.
func (m *Mapping) checkMachines() []error {
	var errs []error
	names := make([]string, 0, len(m.Machines))
	for n := range m.Machines {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[string]string{}
	for _, n := range names {
		mc := m.Machines[n]
		where := "machines." + n
		if !machineNameRE.MatchString(n) || len(n) > 63 {
			errs = append(errs, fmt.Errorf("machines: %q is not a valid machine name (lower-case letters, digits, '-' and '.', at most 63 characters)", n))
		}
		switch {
		case strings.TrimSpace(mc.Subject) == "":
			errs = append(errs, fmt.Errorf("%s.subject: the token's sub claim is required", where))
		case seen[mc.Subject] != "":
			errs = append(errs, fmt.Errorf("%s.subject: %q is also machines.%s's", where, mc.Subject, seen[mc.Subject]))
		default:
			seen[mc.Subject] = n
		}
		if mc.Scope == "" {
			mc.Scope = workflow.TokenRead
		}
		// Only the two scopes that never decide: a machine never approves.
		if mc.Scope != workflow.TokenRead && mc.Scope != workflow.TokenReadWrite {
			errs = append(errs, fmt.Errorf("%s.scope: %q is not read or read-write (a machine never decides)", where, mc.Scope))
		}
		if len(mc.Groups) == 0 {
			errs = append(errs, fmt.Errorf("%s.groups: needs at least one group", where))
		}
		errs = append(errs, checkGroups(where+".groups", mc.Groups)...)
		m.Machines[n] = mc
	}
	return errs
}

// MachineBySubject is the machine the groups file names for a token's sub
// claim, and its name.
func (m Mapping) MachineBySubject(sub string) (string, Machine, bool) {
	if sub == "" {
		return "", Machine{}, false
	}
	for n, mc := range m.Machines {
		if mc.Subject == sub {
			return n, mc, true
		}
	}
	return "", Machine{}, false
}

// MachineToken is what a verified machine token says.
type MachineToken struct {
	Issuer   string
	Subject  string
	Audience []string
	Expiry   time.Time
}

// Why a machine token is refused (each a 401).
var (
	ErrMachineToken    = errors.New("auth: not a valid token of the identity provider (signature, issuer or expiry)")
	ErrMachineAudience = errors.New("auth: the token is not for any of the portal's machine audiences")
)

// MachineVerifier verifies machine tokens with go-oidc against the
// provider's published keys (its JWKS, found by discovery at the issuer):
// the signature, the issuer (exactly the configured one), the expiry,
// and an audience among the configured ones.
type MachineVerifier struct {
	issuer    string
	audiences []string
	now       func() time.Time
	client    *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// NewMachineVerifier verifies tokens of issuer for audiences; the provider
// is discovered at the first token (and again after a failed discovery).
func NewMachineVerifier(issuer string, audiences []string, client *http.Client, now func() time.Time) *MachineVerifier {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &MachineVerifier{issuer: issuer, audiences: slices.Clone(audiences), now: now, client: client}
}

// NewMachineVerifierWithKeys verifies with a fixed key set (tests, or a
// provider whose keys are configured rather than discovered).
func NewMachineVerifierWithKeys(issuer string, audiences []string, keys oidc.KeySet, now func() time.Time) *MachineVerifier {
	v := NewMachineVerifier(issuer, audiences, nil, now)
	v.verifier = oidc.NewVerifier(issuer, keys, v.config())
	return v
}

func (v *MachineVerifier) config() *oidc.Config {
	// The audience is checked against the list below (go-oidc checks one
	// client id); the provider's JWKS may sign with any of its algorithms.
	return &oidc.Config{SkipClientIDCheck: true, Now: v.now}
}

// Issuer is the issuer tokens must name.
func (v *MachineVerifier) Issuer() string { return v.issuer }

func (v *MachineVerifier) get(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, v.client), v.issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery at %s: %v", ErrProviderUnavailable, v.issuer, err)
	}
	v.verifier = p.VerifierContext(oidc.ClientContext(context.WithoutCancel(ctx), v.client), v.config())
	return v.verifier, nil
}

// Verify checks raw and returns its claims; ErrMachineToken or
// ErrMachineAudience when it is refused, ErrProviderUnavailable when the
// provider could not be asked for its keys.
func (v *MachineVerifier) Verify(ctx context.Context, raw string) (MachineToken, error) {
	ver, err := v.get(ctx)
	if err != nil {
		return MachineToken{}, err
	}
	t, err := ver.Verify(oidc.ClientContext(ctx, v.client), raw)
	if err != nil {
		return MachineToken{}, fmt.Errorf("%w: %v", ErrMachineToken, err)
	}
	mt := MachineToken{Issuer: t.Issuer, Subject: t.Subject, Audience: t.Audience, Expiry: t.Expiry}
	if !slices.ContainsFunc(t.Audience, func(a string) bool { return slices.Contains(v.audiences, a) }) {
		return mt, fmt.Errorf("%w: its audience is %v", ErrMachineAudience, t.Audience)
	}
	return mt, nil
}
