package evidence

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// sampleInput is a small connection with every section filled: two
// versions, an approval, a plan with its text and one without, a job with
// steps, a review, usage, a cost statement and audit events that are a
// subsequence of a chain (event 4 is another connection's).
func sampleInput(t *testing.T) Input {
	t.Helper()
	c1 := workflow.ExampleContractFor("red")
	c2 := c1
	c2.BusinessPurpose = "Train the ranking model, second edition."
	planText := "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: hyperpod-ns-red\n# checked: LocalQueue hyperpod-ns-red/hyperpod-ns-red-localqueue\n"
	evidenceJSON := []byte(`{"approved_version":2,"drift":"none","owners":["owner.red@example.test"]}`)
	statement := "{\n  \"team\": \"red\",\n  \"total\": \"120.00\"\n}\n"
	in := Input{
		Connection: Connection{ID: 7, Team: "red", State: "active", ClusterName: "shared-hp", Purpose: "Train the ranking model",
			CurrentVersion: 2, ApprovedVersion: 2, Requester: "owner.red@example.test", CreatedAt: ts(t0), SubmittedAt: ts(t0.Add(time.Hour)), UpdatedAt: ts(t0.Add(5 * time.Hour))},
		Versions: []VersionInput{
			{Version: 2, Author: "owner.red@example.test", CreatedAt: t0.Add(30 * time.Minute), Hash: c2.Hash(), Contract: c2},
			{Version: 1, Author: "owner.red@example.test", CreatedAt: t0, Hash: c1.Hash(), Contract: c1},
		},
		Decisions: []Decision{{ID: 3, Version: 2, Hash: c2.Hash(), Kind: "approve", Actor: "admin1@example.test", Reason: "looks good", At: ts(t0.Add(2 * time.Hour))}},
		Plans: []Plan{
			{Version: 2, Hash: sha256Hex([]byte(planText)), Text: planText, Note: "rebuilt"},
			{Version: 2, Hash: strings.Repeat("ab", 32), Note: "as recorded"},
		},
		Jobs: []Job{{ID: 11, Kind: "provision", Version: 2, PlanHash: sha256Hex([]byte(planText)), AppliedPlanHash: sha256Hex([]byte(planText)), State: "succeeded",
			Attempts: 1, CreatedAt: ts(t0.Add(2 * time.Hour)), UpdatedAt: ts(t0.Add(3 * time.Hour)),
			Steps: []Step{{Seq: 0, Name: "Namespace hyperpod-ns-red", State: "done", Outcome: "created", Attempts: 1},
				{Seq: 1, Name: "RoleBinding hyperpod-ns-red/owners", State: "done", Outcome: "created", Attempts: 1}}}},
		Reviews: []Review{{ID: 1, Version: 2, Trigger: "scheduled", Detail: "90 days", OpenedAt: ts(t0.Add(90 * 24 * time.Hour)),
			DueOn: "2027-01-31", Evidence: string(evidenceJSON), EvidenceHash: sha256Hex(evidenceJSON), Decision: "renew", Reason: "still used", DecidedBy: "reviewer@example.test", DecidedAt: ts(t0.Add(91 * 24 * time.Hour))}},
		Usage: []UsageHour{
			{Start: t0, InstanceType: "ml.p5.48xlarge", GuaranteedAccelSeconds: 8 * 3600, BorrowedAccelSeconds: 1800},
			{Start: t0.Add(time.Hour), InstanceType: "ml.p5.48xlarge", GuaranteedAccelSeconds: 8 * 3600},
			{Start: t0.AddDate(0, 1, 0), InstanceType: "ml.p5.48xlarge", GuaranteedAccelSeconds: 4 * 3600},
		},
		Statements: []Statement{{Month: "2026-11", Hash: sha256Hex([]byte(statement)), Body: statement}},
	}
	// A chain of six events; this connection's are 1, 2, 3 and 5.
	for _, e := range sampleChain() {
		if e.ObjectID == 7 {
			in.Events = append(in.Events, e)
		}
		in.Head = Head{ID: e.ID, Count: int(e.ID), Hash: e.Hash}
	}
	return in
}

// sampleChain is the portal-wide chain of sampleInput: six events, of
// which 4 and 6 are another connection's.
func sampleChain() []Event {
	var chain []Event
	prev := GenesisHash
	for id := int64(1); id <= 6; id++ {
		e := Event{ID: id, At: AuditTime(t0.Add(time.Duration(id) * time.Minute)), ActorID: 1, Actor: "owner.red@example.test",
			Action: "connection.step", ObjectType: "connection", ObjectID: 7, Team: "red", Version: 2, Reason: "step " + string(rune('0'+id)), PrevHash: prev}
		if id == 4 || id == 6 {
			e.ObjectID, e.Team = 8, "blue"
		}
		e.Hash = ChainHash(prev, e)
		prev = e.Hash
		chain = append(chain, e)
	}
	return chain
}

func sampleBundle(t *testing.T) (Bundle, []byte) {
	t.Helper()
	b, err := Build(sampleInput(t), "admin1@example.test", t0.AddDate(0, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := Sign(&b, portalKey); err != nil {
		t.Fatal(err)
	}
	data, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, data
}

// resign encodes a changed bundle with its bundle hash recomputed: what
// someone who edits a bundle and knows the format would hand over. The
// signature is left as it was, so it fails too; the content checks must
// name what changed all the same (forge, in sign_test.go, signs again).
func resign(t *testing.T, b Bundle) []byte {
	t.Helper()
	h, err := Hash(b)
	if err != nil {
		t.Fatal(err)
	}
	b.BundleHash = h
	data, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestVerifyAcceptsWhatBuildMakes(t *testing.T) {
	b, data := sampleBundle(t)
	rep := Verify(data)
	if !rep.OK() {
		t.Fatalf("Verify refused a fresh bundle: %v", rep.Failures)
	}
	all := strings.Join(rep.Checked, "\n")
	for _, want := range []string{
		"2 contract version(s): each hash recomputed",
		"1 decision(s)",
		"2 plan(s): 1 hash(es) recomputed from the plan text, 1 as recorded",
		"1 job(s) with 2 applied step(s)",
		"1 review(s)",
		"1 frozen cost statement(s)",
		"4 audit event(s): each chain hash recomputed from its fields and prev_hash; ids increasing; 2 link(s) between adjacent events checked",
		"bundle hash " + b.BundleHash,
		"exactly the portal's encoding",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("Verify's checks do not say %q:\n%s", want, all)
		}
	}
	// Build orders what it was given and sums usage by month.
	if b.Versions[0].Version != 1 || len(b.Usage.Months) != 2 || b.Usage.Months[0].GuaranteedAccelSeconds != 16*3600 || b.Usage.Months[0].HoursCollected != 2 {
		t.Errorf("versions %v, usage %+v", b.Versions, b.Usage.Months)
	}
}

// TestEveryLineChangeIsRefused changes bytes on every line of a bundle, one
// at a time: the indentation, the first byte (a key's quote or a bracket),
// and bytes of the value (the middle and the last), flipping the low bit
// and, for letters, the case. Every line of the indented encoding is one
// field or one bracket, so every field of every section is changed:
// hashes, contracts, plan texts, reasons, numbers, booleans, keys and
// punctuation. Verify must refuse each.
func TestEveryLineChangeIsRefused(t *testing.T) {
	_, data := sampleBundle(t)
	lines, tried := 0, 0
	mutated := make([]byte, len(data))
	try := func(i int, bit byte) {
		copy(mutated, data)
		mutated[i] ^= bit
		tried++
		if Verify(mutated).OK() {
			t.Fatalf("Verify accepted the bundle with byte %d changed from %q to %q (context %q)", i, data[i], mutated[i], context(data, i))
		}
	}
	for start := 0; start < len(data); {
		end := start + bytes.IndexByte(data[start:], '\n')
		lines++
		content := start + len(data[start:end]) - len(bytes.TrimLeft(data[start:end], " "))
		positions := []int{end} // the newline
		if content > start {
			positions = append(positions, start)
		}
		if content < end {
			positions = append(positions, content, (content+end)/2, end-1)
		}
		for _, i := range positions {
			try(i, 0x01)
			if c := data[i] | 0x20; c >= 'a' && c <= 'z' {
				try(i, 0x20)
			}
		}
		start = end + 1
	}
	if lines < 150 {
		t.Fatalf("the sample bundle has %d lines: too few to cover every section", lines)
	}
	t.Logf("%d changes on %d lines refused", tried, lines)
}

func context(data []byte, i int) string {
	return string(data[max(0, i-40):min(len(data), i+40)])
}

func TestVerifyRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(b *Bundle) []byte
		want   string
	}{
		{"audit events reordered", func(b *Bundle) []byte {
			ev := b.Audit.Events
			ev[0], ev[1] = ev[1], ev[0]
			return resign(t, *b)
		}, "events must be in chain order"},
		{"an audit event altered, its hash recomputed, its successor's prev_hash not", func(b *Bundle) []byte {
			e := &b.Audit.Events[1]
			e.Reason = "nothing happened here"
			e.Hash = ChainHash(e.PrevHash, *e)
			return resign(t, *b)
		}, "audit event 3: its prev_hash is not the hash of event 2"},
		{"an audit event altered, its hash not recomputed", func(b *Bundle) []byte {
			b.Audit.Events[3].Actor = "someone.else@example.test"
			return resign(t, *b)
		}, "audit event 5: its hash is not the chain hash"},
		{"an audit event removed between adjacent ones", func(b *Bundle) []byte {
			// Dropping event 2 leaves 1 and 3, which are not adjacent:
			// that alone cannot be seen; renumbering 3 as 2 can.
			b.Audit.Events[2].ID = 2
			b.Audit.Events = append(b.Audit.Events[:1], b.Audit.Events[2:]...)
			return resign(t, *b)
		}, "audit event 2: its prev_hash is not the hash of event 1"},
		{"the first event does not follow the genesis hash", func(b *Bundle) []byte {
			e := &b.Audit.Events[0]
			e.PrevHash = strings.Repeat("1", 64)
			e.Hash = ChainHash(e.PrevHash, *e)
			b.Audit.Events[1].PrevHash = e.Hash
			b.Audit.Events[1].Hash = ChainHash(e.Hash, b.Audit.Events[1])
			b.Audit.Events[2].PrevHash = b.Audit.Events[1].Hash
			b.Audit.Events[2].Hash = ChainHash(b.Audit.Events[2].PrevHash, b.Audit.Events[2])
			return resign(t, *b)
		}, "audit event 1: the chain's first event must follow the genesis hash"},
		{"an event newer than the head", func(b *Bundle) []byte {
			b.Audit.Head.ID = 4
			return resign(t, *b)
		}, "newer than the chain head at export"},
		{"the head's hash is not the last event's", func(b *Bundle) []byte {
			b.Audit.Head = Head{ID: 5, Count: 5, Hash: strings.Repeat("c", 64)}
			return resign(t, *b)
		}, "it is the chain head at export, but its hash is not the head's"},
		{"another connection's event", func(b *Bundle) []byte {
			e := &b.Audit.Events[3]
			e.ObjectID = 8
			e.Hash = ChainHash(e.PrevHash, *e)
			return resign(t, *b)
		}, "not this connection"},
		{"a contract changed", func(b *Bundle) []byte {
			b.Versions[1].Contract = bytes.Replace(b.Versions[1].Contract, []byte("second edition"), []byte("third edition"), 1)
			return resign(t, *b)
		}, "contract version 2: its hash"},
		{"a contract changed and its hash recomputed", func(b *Bundle) []byte {
			c, err := workflow.DecodeContract(bytes.Replace(b.Versions[1].Contract, []byte("second edition"), []byte("third edition"), 1))
			if err != nil {
				t.Fatal(err)
			}
			b.Versions[1].Contract, b.Versions[1].Hash = c.Canonical(), c.Hash()
			return resign(t, *b)
		}, "decision 3 (approve): it names version 2"},
		{"a contract not in canonical form", func(b *Bundle) []byte {
			var m map[string]any
			if err := json.Unmarshal(b.Versions[0].Contract, &m); err != nil {
				t.Fatal(err)
			}
			b.Versions[0].Contract, _ = json.Marshal(m) // keys sorted: not the Contract type's order
			return resign(t, *b)
		}, "contract version 1: the contract is not in canonical form"},
		{"a version missing", func(b *Bundle) []byte {
			b.Versions = b.Versions[1:]
			return resign(t, *b)
		}, "entry 0 is version 2"},
		{"a plan's text changed", func(b *Bundle) []byte {
			b.Plans[0].Text = strings.Replace(b.Plans[0].Text, "hyperpod-ns-red", "hyperpod-ns-blue", 1)
			return resign(t, *b)
		}, "plan of version 2: its hash"},
		{"a job's steps reordered", func(b *Bundle) []byte {
			s := b.Jobs[0].Steps
			s[0], s[1] = s[1], s[0]
			return resign(t, *b)
		}, "steps are in apply order"},
		{"a review's frozen evidence changed", func(b *Bundle) []byte {
			b.Reviews[0].Evidence = `{"approved_version":2,"drift":"some","owners":["owner.red@example.test"]}`
			return resign(t, *b)
		}, "review 1: its evidence hash"},
		{"a cost statement changed", func(b *Bundle) []byte {
			b.Costs.Statements[0].Body = strings.Replace(b.Costs.Statements[0].Body, "120.00", "12.00", 1)
			return resign(t, *b)
		}, "cost statement 2026-11: its hash"},
		{"only the bundle hash forged", func(b *Bundle) []byte {
			b.BundleHash = strings.Repeat("0", 64)
			data, err := Encode(*b)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}, "bundle_hash"},
		{"a value changed, the bundle hash kept", func(b *Bundle) []byte {
			b.Usage.Months[0].BorrowedAccelSeconds++
			data, err := Encode(*b)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}, "the file was changed after it was made"},
		{"the same content indented otherwise", func(b *Bundle) []byte {
			var out bytes.Buffer
			if err := json.Indent(&out, resign(t, *b), "", "\t"); err != nil {
				t.Fatal(err)
			}
			return out.Bytes()
		}, "not byte for byte the portal's encoding"},
		{"a key spelled in another case", func(b *Bundle) []byte {
			return bytes.Replace(resign(t, *b), []byte(`"purpose"`), []byte(`"Purpose"`), 1)
		}, "not byte for byte the portal's encoding"},
		{"an unknown field", func(b *Bundle) []byte {
			return bytes.Replace(resign(t, *b), []byte(`"format": `), []byte(`"signed": true, "format": `), 1)
		}, "unknown field"},
		{"data after the bundle", func(b *Bundle) []byte {
			return append(resign(t, *b), []byte("{}\n")...)
		}, "data after the bundle"},
		{"another format version", func(b *Bundle) []byte {
			b.FormatVersion = 3
			return resign(t, *b)
		}, "this verifier reads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := sampleBundle(t)
			rep := Verify(tc.change(&b))
			if rep.OK() {
				t.Fatalf("Verify accepted it; checked: %v", rep.Checked)
			}
			if err := rep.Err(); !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify refused it with %v; want a failure saying %q", err, tc.want)
			}
		})
	}
}
