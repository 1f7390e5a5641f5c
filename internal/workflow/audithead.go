package workflow

import "fmt"

// AuditHead is the audit chain's head as the portal publishes it once a UTC
// day (issue 31 item 11): the newest event's id, the number of events up to
// it, its hash and time, and the installation key's signature of
// signing.HeadLine over them.
type AuditHead struct {
	Day       string // 2006-01-02, UTC
	ID        int64
	Count     int
	Hash      string
	At        string
	Line      string // the signed text
	KeyID     string
	Signature string
}

// AuditHeadNotice is the day's publication, to the admins, by mail and
// webhook through the outbox: a copy of the chain's head kept outside the
// database (in mailboxes and the webhook's channel), with what to do with
// it. Whoever keeps it can later run `portal audit verify --head HASH`
// against the database, or `portal evidence verify --audit-head ID:HASH`
// against a bundle, and see that events up to it were removed or changed.
func AuditHeadNotice(h AuditHead) Notice {
	return Notice{
		Kind: "audit.head_published",
		To:   ToAdmins,
		Subject: fmt.Sprintf("Audit chain head for %s: event %d (%d events), sha256 %s",
			h.Day, h.ID, h.Count, h.Hash),
		Body: fmt.Sprintf(`Keep this message: it is the audit chain's head on %s, published outside the portal's database.

head_id: %d
head_count: %d
head_hash: %s
head_at: %s
signed_text: %s
key_id: %s
signature (Ed25519, base64, over "hyperpod-portal/audit-head\n" + signed_text): %s

The key's public half: /.well-known/hyperpod-portal/evidence-key on the portal (save it as KEY.json).
To check that this message is the portal's: portal evidence verify-head --key-file KEY.json "SIGNED_TEXT" SIGNATURE
To check that no event up to this head was removed or changed: portal audit verify --head %s
To check an evidence bundle against it: portal evidence verify --key-file KEY.json --audit-head %d:%s BUNDLE.json`,
			h.Day, h.ID, h.Count, h.Hash, h.At, h.Line, h.KeyID, h.Signature, h.Hash, h.ID, h.Hash),
	}
}
