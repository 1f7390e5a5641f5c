package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Format names the document; FormatVersion is the layout this package
// writes: 2, signed. Verify reads 2 and the unsigned 1 (which it reports as
// unsigned, and refuses when given a trusted key); it refuses any other.
const (
	Format        = "hyperpod-portal-evidence-bundle"
	FormatVersion = 2
	// formatUnsigned is the first layout: the same document without a
	// signature.
	formatUnsigned = 1
)

// TimeLayout is how every time in a bundle is written: UTC, fixed width.
// It is the audit trail's own layout (internal/store's fmtTime), so an audit
// event's time is the exact text its chain hash was taken over.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// GenesisHash is the prev_hash of the audit trail's first event.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Limits says what a bundle's verification proves and what it does not; a
// bundle carries it so that whoever reads the file reads it too.
var Limits = []string{
	"Verification recomputes, from what this file carries: each contract version's SHA-256 from its canonical contract; each decision's version hash against that version; each plan hash whose hashed text is included; each frozen cost statement's SHA-256 from its body; each audit event's chain hash from its fields and its stated prev_hash; and the bundle hash over the whole document. It checks that the file is exactly in the portal's encoding, so a changed byte anywhere is refused.",
	"Audit events are those about this connection only: a subsequence of the portal-wide chain. Where two of them are adjacent in the chain (consecutive ids), the later one's prev_hash must be the earlier one's hash; events of other connections and teams between them are not in the file, so a removed event between two non-adjacent ones cannot be seen offline.",
	"The hashes show that the file is as it was written, not who wrote it: someone who rewrites a bundle and recomputes every hash makes a file whose hashes verify. The signature says who: the installation's Ed25519 key signed \"hyperpod-portal/evidence-bundle\\n\" followed by bundle_hash. It proves that the portal made this file only when checked against the key the portal publishes (/.well-known/hyperpod-portal/evidence-key and the README): `portal evidence verify --key-file KEY FILE`. Checked only against the public_key the file itself carries, it proves nothing, since a forger signs with a key of their own. A good signature does not prove that the portal's database was sound when the bundle was made: it proves what the portal's records said at generated_at.",
	"Given an audit head the portal published (once a day, by mail and webhook: `--audit-head ID:HASH`), the verifier checks offline every place where the bundle and that head meet: the chain head at export, if it is the same event, has the published hash; an event of the bundle that is the published head has its hash; the event right after it follows it (prev_hash). Where they do not meet (the bundle was exported before or after the head, and carries neither the head's event nor the next), offline data cannot show that the bundle's events are in the published chain; `portal audit verify --head HASH` on the portal's database shows that the chain up to the published head is intact, and the audit page shows the events' hashes to compare.",
	"Plans whose text is not included (the cluster settings changed since approval, or the plan is not an EKS plan) are as recorded: their hash is shown, not recomputed. Usage summaries are as collected and carry no hash of their own beyond the bundle hash.",
}

// Bundle is the document. Field order is the encoding's order.
type Bundle struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	GeneratedAt   string `json:"generated_at"`
	GeneratedBy   string `json:"generated_by"`

	Connection Connection `json:"connection"`
	Versions   []Version  `json:"contract_versions"`
	Decisions  []Decision `json:"decisions"`
	Plans      []Plan     `json:"plans"`
	Jobs       []Job      `json:"jobs"`
	Reviews    []Review   `json:"reviews"`
	// Exceptions are the connection's exceptions with an expiry
	// (workflow/exception.go), oldest first; absent when it has none (a
	// bundle from before exceptions hashes as it did).
	Exceptions []Exception `json:"exceptions,omitempty"`
	Usage      Usage       `json:"usage"`
	Costs      Costs       `json:"cost_statements"`
	Audit      Audit       `json:"audit"`

	Limits []string `json:"verification_limits"`
	// BundleHash is the SHA-256 of the document as encoded with this
	// field empty and no signature.
	BundleHash string `json:"bundle_hash"`
	// Signature is the installation key's signature of BundleHash (format
	// 2); format 1 bundles have none.
	Signature *Signature `json:"signature,omitempty"`
}

// Exception is one exception of the connection: the priority class it
// granted beyond the contract, why, who granted it, from when until when,
// and how it ended (its audit events carry each step too).
type Exception struct {
	ID            int64  `json:"id"`
	PriorityClass string `json:"priority_class"`
	Reason        string `json:"reason"`
	GrantedBy     string `json:"granted_by"`
	Start         string `json:"start"`
	End           string `json:"end"`
	State         string `json:"state"`
	AppliedAt     string `json:"applied_at"`
	RevokedBy     string `json:"revoked_by"`
	RevokeReason  string `json:"revoke_reason"`
	EndedAt       string `json:"ended_at"`
	RevertedAt    string `json:"reverted_at"`
}

// Signature is the installation key's Ed25519 signature (internal/signing)
// of Covers: "hyperpod-portal/evidence-bundle\n" and the bundle hash. Key
// id and public key name the key that signed; only a verifier that compares
// them with the key the portal publishes learns who made the bundle.
type Signature struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
	Covers    string `json:"covers"`
	Value     string `json:"value"`
}

// Connection is the connection as it stands at export.
type Connection struct {
	ID              int64  `json:"id"`
	Team            string `json:"team"`
	State           string `json:"state"`
	Amendment       string `json:"amendment"`
	ClusterName     string `json:"cluster_name"`
	Purpose         string `json:"purpose"`
	CurrentVersion  int    `json:"current_version"`
	ApprovedVersion int    `json:"approved_version"`
	Requester       string `json:"requester"`
	CreatedAt       string `json:"created_at"`
	SubmittedAt     string `json:"submitted_at"`
	UpdatedAt       string `json:"updated_at"`
}

// Version is one immutable contract version: its canonical contract JSON
// (workflow.Contract.Canonical) and the hash the portal stored for it, which
// approvals and jobs bind to.
type Version struct {
	Version   int             `json:"version"`
	Author    string          `json:"author"`
	CreatedAt string          `json:"created_at"`
	Hash      string          `json:"hash"`
	Contract  json.RawMessage `json:"contract"`
}

// Decision is an admin's approval, rejection or change request of a
// version, pinned to the version's hash.
type Decision struct {
	ID      int64  `json:"id"`
	Version int    `json:"version"`
	Hash    string `json:"version_hash"`
	Kind    string `json:"kind"`
	Actor   string `json:"actor"`
	Reason  string `json:"reason"`
	At      string `json:"at"`
}

// Plan is the provisioning plan an approval pinned: its hash and, when the
// portal could rebuild it at export with the same hash, the exact text the
// hash is taken over (provision.Plan.HashedText: the objects' YAML, the
// HyperPod objects only checked, the AWS calls). Text is "" otherwise, and
// Note says why.
type Plan struct {
	Version int    `json:"version"`
	Hash    string `json:"hash"`
	Text    string `json:"hashed_text"`
	Note    string `json:"note"`
}

// Job is one provisioning job (provision, amend, reapply, revoke) with the
// steps its last attempt applied.
type Job struct {
	ID              int64  `json:"id"`
	Kind            string `json:"kind"`
	Version         int    `json:"version"`
	FromVersion     int    `json:"from_version"`
	PlanHash        string `json:"plan_hash"`
	AppliedPlanHash string `json:"applied_plan_hash"`
	AdoptNamespace  string `json:"adopt_namespace"`
	State           string `json:"state"`
	Attempts        int    `json:"attempts"`
	DryRun          bool   `json:"dry_run"`
	LastError       string `json:"last_error"`
	CreatedAt       string `json:"created_at"`
	UpdatedAt       string `json:"updated_at"`
	Steps           []Step `json:"steps"`
}

// Step is one applied step of a job.
type Step struct {
	Seq        int    `json:"seq"`
	Name       string `json:"name"`
	State      string `json:"state"`
	Outcome    string `json:"outcome"`
	Detail     string `json:"detail"`
	Attempts   int    `json:"attempts"`
	StartedAt  string `json:"started_at"`
	FinishedAt string `json:"finished_at"`
}

// Review is a lifecycle review with the evidence frozen when it opened:
// Evidence is the exact JSON text whose SHA-256 is EvidenceHash (kept as
// text, not re-encoded, so that the hash can be recomputed byte for byte).
type Review struct {
	ID           int64    `json:"id"`
	Version      int      `json:"version"`
	Trigger      string   `json:"trigger"`
	Detail       string   `json:"detail"`
	MoreTriggers []string `json:"more_triggers"`
	DueOn        string   `json:"due_on"`
	OpenedAt     string   `json:"opened_at"`
	Demo         bool     `json:"demo"`
	Evidence     string   `json:"evidence_json"`
	EvidenceHash string   `json:"evidence_sha256"`
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason"`
	Deadline     string   `json:"deadline"`
	DecidedBy    string   `json:"decided_by"`
	DecidedAt    string   `json:"decided_at"`
}

// Usage is the team's collected usage by month and instance type, from the
// connection's creation to the export. Usage is metered per team (its
// namespaces, or its Slurm account: namespace slurm:<account>), not per
// connection.
type Usage struct {
	Note   string       `json:"note"`
	Months []UsageMonth `json:"months"`
}

// UsageMonth is one month of one instance type: allocated
// accelerator-seconds, guaranteed and borrowed, and the hours collected.
type UsageMonth struct {
	Month                  string `json:"month"`
	InstanceType           string `json:"instance_type"`
	GuaranteedAccelSeconds int64  `json:"guaranteed_accelerator_seconds"`
	BorrowedAccelSeconds   int64  `json:"borrowed_accelerator_seconds"`
	HoursCollected         int    `json:"hours_collected"`
}

// Costs are the team's frozen monthly cost statements, each with the body
// and SHA-256 the portal froze; Omitted says why there are none when the
// exporter may not read costs.
type Costs struct {
	Omitted    string      `json:"omitted"`
	Statements []Statement `json:"statements"`
}

// Statement is one frozen statement: Body is the exact JSON whose SHA-256
// is Hash (usage.Statement.JSON).
type Statement struct {
	Month string `json:"month"`
	Hash  string `json:"sha256"`
	Body  string `json:"body"`
}

// Audit is the connection's audit events, oldest first, and the chain's
// head when the bundle was made.
type Audit struct {
	Scope  string  `json:"scope"`
	Events []Event `json:"events"`
	Head   Head    `json:"chain_head_at_export"`
}

// Event is one audit event with its place in the portal-wide chain: At is
// the exact text the hash covers (TimeLayout).
type Event struct {
	ID         int64  `json:"id"`
	At         string `json:"at"`
	ActorID    int64  `json:"actor_id"`
	Actor      string `json:"actor"`
	Action     string `json:"action"`
	ObjectType string `json:"object_type"`
	ObjectID   int64  `json:"object_id"`
	Team       string `json:"team"`
	Version    int    `json:"version"`
	Reason     string `json:"reason"`
	PrevHash   string `json:"prev_hash"`
	Hash       string `json:"hash"`
}

// Head is the portal-wide chain's newest event at export.
type Head struct {
	ID    int64  `json:"id"`
	Count int    `json:"count"`
	Hash  string `json:"hash"`
}

// Encode is the bundle's one encoding: indented JSON, two spaces, no HTML
// escaping, a final newline. Verify requires a file to be exactly this.
func Encode(b Bundle) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Hash is the bundle hash: the SHA-256 of Encode(b) with BundleHash empty
// and no signature.
func Hash(b Bundle) (string, error) {
	b.BundleHash = ""
	b.Signature = nil
	body, err := Encode(b)
	if err != nil {
		return "", err
	}
	return sha256Hex(body), nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ts writes a time in TimeLayout; the zero time is "".
func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeLayout)
}
