// Package evidence is a connection's evidence bundle: everything the portal
// recorded about one connection, from its request to the day of export, in
// one self-checking JSON document, and the offline check of such a document
// (`portal evidence verify [--key-file KEY.json] FILE`).
//
// A bundle carries the connection; each contract version with its canonical
// contract and the hash the portal stored for it; the admins' decisions;
// the provisioning jobs with their plan hashes and applied steps (and the
// text each plan hash is taken over, when the plan could be rebuilt at
// export); the team's usage by month; the team's frozen cost statements
// (for exporters who may read costs); the connection's audit events with
// their chain hashes and the chain's head at export; and a hash of all of
// it, signed with the installation's Ed25519 key (internal/signing; the
// signature covers the bundle hash).
//
// Verify recomputes every hash it can from what the bundle carries, checks
// that the document is byte for byte in the portal's encoding (so one
// changed byte anywhere is refused, whitespace included), and returns what it
// checked. VerifyWith also checks the signature against a trusted key (the
// portal's published one) and compares the audit chain with a head the
// portal published, where they meet. What that proves, and what it cannot,
// is in Limits.
//
// The package is pure: it imports internal/workflow (contract hashing) and
// internal/signing (Ed25519), and nothing that reads a database, the
// network or a cluster. The store reads
// the inputs (store.DB.EvidenceInput); the web layer serves the bundle.
package evidence
