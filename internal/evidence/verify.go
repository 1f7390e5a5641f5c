package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Report is what Verify checked: one line per passed check, one per
// failure, and one per note: what was not checked, and why.
type Report struct {
	Checked  []string
	Failures []string
	Notes    []string
	// SignedByTrustedKey is true when the signature was checked against
	// the trusted key and is good.
	SignedByTrustedKey bool
}

// OK reports whether nothing failed.
func (r Report) OK() bool { return len(r.Failures) == 0 }

// Err is nil when nothing failed, else an error naming every failure.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("evidence bundle refused: %s", strings.Join(r.Failures, "; "))
}

func (r *Report) pass(format string, a ...any) {
	r.Checked = append(r.Checked, fmt.Sprintf(format, a...))
}
func (r *Report) fail(format string, a ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, a...))
}
func (r *Report) note(format string, a ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, a...))
}

// Decode reads a bundle strictly: one JSON object, no unknown fields,
// nothing after it.
func Decode(data []byte) (Bundle, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b Bundle
	if err := dec.Decode(&b); err != nil {
		return Bundle{}, fmt.Errorf("not an evidence bundle: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Bundle{}, errors.New("not an evidence bundle: data after the bundle's object")
	}
	return b, nil
}

// Verify checks a bundle file offline: it recomputes every hash the bundle
// carries the input of (contract versions, plan texts, cost statements,
// audit events, the bundle itself), checks the order of every list and
// the audit chain's links between adjacent events, and requires the file to
// be byte for byte the portal's encoding of what it decodes to. It checks
// the signature against the key the file names only: see VerifyWith, and
// Limits for what this proves.
func Verify(data []byte) Report { return VerifyWith(data, Options{}) }

// VerifyWith is Verify that also checks the signature against o's trusted
// key and the chain against o's published audit head.
func VerifyWith(data []byte, o Options) Report {
	var r Report
	b, err := Decode(data)
	if err != nil {
		r.fail("%v", err)
		return r
	}
	if b.Format != Format || (b.FormatVersion != FormatVersion && b.FormatVersion != formatUnsigned) {
		r.fail("format %q version %d: this verifier reads %q versions %d and %d", b.Format, b.FormatVersion, Format, formatUnsigned, FormatVersion)
		return r
	}
	r.pass("format %s, version %d", b.Format, b.FormatVersion)
	if _, err := time.Parse(TimeLayout, b.GeneratedAt); err != nil {
		r.fail("generated_at %q is not a time in the bundle's layout", b.GeneratedAt)
	}
	hashes := verifyVersions(&r, b)
	verifyDecisions(&r, b, hashes)
	verifyPlansAndJobs(&r, b, hashes)
	verifyReviews(&r, b, hashes)
	verifyCosts(&r, b)
	verifyAudit(&r, b)
	if o.AuditHead != nil {
		verifyAuditHead(&r, b, *o.AuditHead)
	}

	// The bundle hash, then the bytes: together they refuse any change to
	// the file, values and formatting alike.
	if want, err := Hash(b); err != nil {
		r.fail("bundle hash: %v", err)
	} else if b.BundleHash != want {
		r.fail("bundle_hash %q does not match the document (recomputed %s): the file was changed after it was made", b.BundleHash, want)
	} else {
		r.pass("bundle hash %s recomputed over the whole document", want)
	}
	if enc, err := Encode(b); err != nil || !bytes.Equal(enc, data) {
		r.fail("the file is not byte for byte the portal's encoding of its content (at byte %d): whitespace, escaping, key spelling or repeated keys were changed", firstDiff(enc, data))
	} else {
		r.pass("the file is exactly the portal's encoding of its content (%d bytes)", len(data))
	}
	verifySignature(&r, b, o.TrustedKey)
	return r
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// verifyVersions recomputes each version's hash from its contract and
// returns the hashes by version.
func verifyVersions(r *Report, b Bundle) map[int]string {
	hashes := map[int]string{}
	ok := true
	for i, v := range b.Versions {
		if v.Version != i+1 {
			r.fail("contract versions: entry %d is version %d, want %d (versions are numbered 1, 2, ... in order)", i, v.Version, i+1)
			ok = false
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, v.Contract); err != nil {
			r.fail("contract version %d: %v", v.Version, err)
			ok = false
			continue
		}
		c, err := decodeContract(compact.Bytes())
		if err != nil {
			r.fail("contract version %d: %v", v.Version, err)
			ok = false
			continue
		}
		if !bytes.Equal(c.Canonical(), compact.Bytes()) {
			r.fail("contract version %d: the contract is not in canonical form", v.Version)
			ok = false
			continue
		}
		if got := c.Hash(); got != v.Hash {
			r.fail("contract version %d: its hash %q is not the SHA-256 of its contract (%s)", v.Version, v.Hash, got)
			ok = false
			continue
		}
		hashes[v.Version] = v.Hash
	}
	switch {
	case len(b.Versions) == 0:
		r.fail("contract versions: none (every connection has version 1)")
	case b.Connection.CurrentVersion != len(b.Versions):
		r.fail("connection: current version %d, but the bundle has versions 1 to %d", b.Connection.CurrentVersion, len(b.Versions))
	case b.Connection.ApprovedVersion < 0 || b.Connection.ApprovedVersion > len(b.Versions):
		r.fail("connection: approved version %d is not among the bundle's versions", b.Connection.ApprovedVersion)
	case ok:
		r.pass("%d contract version(s): each hash recomputed from its canonical contract", len(b.Versions))
	}
	return hashes
}

func verifyDecisions(r *Report, b Bundle, hashes map[int]string) {
	ok := true
	for i, d := range b.Decisions {
		if i > 0 && d.ID <= b.Decisions[i-1].ID {
			r.fail("decisions: decision %d after decision %d: not in recorded order", d.ID, b.Decisions[i-1].ID)
			ok = false
		}
		if h, found := hashes[d.Version]; !found || h != d.Hash {
			r.fail("decision %d (%s): it names version %d with hash %q, which is not that version's hash", d.ID, d.Kind, d.Version, d.Hash)
			ok = false
		}
	}
	if ok {
		r.pass("%d decision(s): each pinned to its version's recomputed hash, in order", len(b.Decisions))
	}
}

func verifyPlansAndJobs(r *Report, b Bundle, hashes map[int]string) {
	ok, recomputed := true, 0
	for i, p := range b.Plans {
		if _, found := hashes[p.Version]; !found {
			r.fail("plan %d: version %d is not in the bundle", i, p.Version)
			ok = false
		}
		if !isHash(p.Hash) {
			r.fail("plan of version %d: %q is not a SHA-256", p.Version, p.Hash)
			ok = false
			continue
		}
		if p.Text == "" {
			continue
		}
		if got := sha256Hex([]byte(p.Text)); got != p.Hash {
			r.fail("plan of version %d: its hash %s is not the SHA-256 of its text (%s)", p.Version, p.Hash, got)
			ok = false
			continue
		}
		recomputed++
	}
	if ok {
		r.pass("%d plan(s): %d hash(es) recomputed from the plan text, %d as recorded", len(b.Plans), recomputed, len(b.Plans)-recomputed)
	}
	ok = true
	steps := 0
	for i, j := range b.Jobs {
		if i > 0 && j.ID <= b.Jobs[i-1].ID {
			r.fail("jobs: job %d after job %d: not in recorded order", j.ID, b.Jobs[i-1].ID)
			ok = false
		}
		if _, found := hashes[j.Version]; !found {
			r.fail("job %d: version %d is not in the bundle", j.ID, j.Version)
			ok = false
		}
		for k, s := range j.Steps {
			if s.Seq != k {
				r.fail("job %d: step %d has seq %d: steps are in apply order from 0", j.ID, k, s.Seq)
				ok = false
			}
		}
		steps += len(j.Steps)
	}
	if ok {
		r.pass("%d job(s) with %d applied step(s): each names a version of the bundle, steps in apply order", len(b.Jobs), steps)
	}
}

func verifyCosts(r *Report, b Bundle) {
	ok := true
	for i, s := range b.Costs.Statements {
		if i > 0 && s.Month <= b.Costs.Statements[i-1].Month {
			r.fail("cost statements: %s after %s: not in month order", s.Month, b.Costs.Statements[i-1].Month)
			ok = false
		}
		if got := sha256Hex([]byte(s.Body)); got != s.Hash {
			r.fail("cost statement %s: its hash %s is not the SHA-256 of its body (%s)", s.Month, s.Hash, got)
			ok = false
		}
	}
	if ok {
		r.pass("%d frozen cost statement(s): each hash recomputed from its body", len(b.Costs.Statements))
	}
}

// ChainHash is the audit trail's hash of one event (internal/store's
// chainHash): SHA-256 over the previous hash and every field, each
// length-prefixed ("<len>:<value>|"), times in TimeLayout.
func ChainHash(prev string, e Event) string {
	h := sha256.New()
	for _, f := range []string{
		prev, e.At, strconv.FormatInt(e.ActorID, 10), e.Actor, e.Action, e.ObjectType,
		strconv.FormatInt(e.ObjectID, 10), e.Team, strconv.Itoa(e.Version), e.Reason,
	} {
		fmt.Fprintf(h, "%d:%s|", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func verifyAudit(r *Report, b Bundle) {
	ok, links := true, 0
	head := b.Audit.Head
	if !isHash(head.Hash) || head.ID < 0 || head.Count < 0 {
		r.fail("audit: the chain head at export is not an id, a count and a SHA-256")
		ok = false
	}
	for i, e := range b.Audit.Events {
		if e.ObjectType != "connection" || e.ObjectID != b.Connection.ID {
			r.fail("audit event %d: it is about %s %d, not this connection", e.ID, e.ObjectType, e.ObjectID)
			ok = false
		}
		if _, err := time.Parse(TimeLayout, e.At); err != nil {
			r.fail("audit event %d: time %q is not in the trail's layout", e.ID, e.At)
			ok = false
		}
		if !isHash(e.PrevHash) || !isHash(e.Hash) {
			r.fail("audit event %d: prev_hash and hash must be SHA-256s", e.ID)
			ok = false
			continue
		}
		if want := ChainHash(e.PrevHash, e); e.Hash != want {
			r.fail("audit event %d: its hash is not the chain hash of its fields and prev_hash (recomputed %s): the event was altered", e.ID, want)
			ok = false
		}
		if e.ID == 1 && e.PrevHash != GenesisHash {
			r.fail("audit event 1: the chain's first event must follow the genesis hash")
			ok = false
		}
		if e.ID > head.ID {
			r.fail("audit event %d: newer than the chain head at export (%d)", e.ID, head.ID)
			ok = false
		}
		if e.ID == head.ID && e.Hash != head.Hash {
			r.fail("audit event %d: it is the chain head at export, but its hash is not the head's", e.ID)
			ok = false
		}
		if i == 0 {
			continue
		}
		prev := b.Audit.Events[i-1]
		switch {
		case e.ID <= prev.ID:
			r.fail("audit event %d after event %d: events must be in chain order (ids increasing)", e.ID, prev.ID)
			ok = false
		case e.ID == prev.ID+1 && e.PrevHash != prev.Hash:
			r.fail("audit event %d: its prev_hash is not the hash of event %d, which precedes it in the chain (an event was altered, removed or reordered)", e.ID, prev.ID)
			ok = false
		case e.ID == prev.ID+1:
			links++
		}
	}
	if ok {
		r.pass("%d audit event(s): each chain hash recomputed from its fields and prev_hash; ids increasing; %d link(s) between adjacent events checked; none newer than the chain head at export (event %d, %s)",
			len(b.Audit.Events), links, head.ID, head.Hash)
	}
}

var decodeContract = workflow.DecodeContract

// verifyReviews recomputes each review's frozen evidence hash: the SHA-256
// of the evidence JSON exactly as frozen.
func verifyReviews(r *Report, b Bundle, hashes map[int]string) {
	ok := true
	for i, rv := range b.Reviews {
		if i > 0 && rv.ID <= b.Reviews[i-1].ID {
			r.fail("reviews: review %d after review %d: not in recorded order", rv.ID, b.Reviews[i-1].ID)
			ok = false
		}
		if _, found := hashes[rv.Version]; !found {
			r.fail("review %d: version %d is not in the bundle", rv.ID, rv.Version)
			ok = false
		}
		if !json.Valid([]byte(rv.Evidence)) {
			r.fail("review %d: its frozen evidence is not JSON", rv.ID)
			ok = false
		}
		if got := sha256Hex([]byte(rv.Evidence)); got != rv.EvidenceHash {
			r.fail("review %d: its evidence hash %q is not the SHA-256 of its frozen evidence (%s)", rv.ID, rv.EvidenceHash, got)
			ok = false
		}
	}
	if ok {
		r.pass("%d review(s): each frozen evidence hash recomputed", len(b.Reviews))
	}
}
