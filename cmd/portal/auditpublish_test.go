package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/web"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// replicas opens one new migrated SQLite database twice, as two portal
// processes would.
func replicas(t *testing.T) (*store.DB, *store.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "portal.db")
	a, err := store.OpenMigrated(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

var replicaSessionKey = []byte("0123456789abcdef0123456789abcdef")

// TestSigningKeySharedByReplicas: processes starting at once on one
// database load one key (whichever made it first), and a process with
// another session key cannot open it and says so rather than make another.
func TestSigningKeySharedByReplicas(t *testing.T) {
	a, b := replicas(t)
	const n = 6
	keys := make([]string, n)
	made := make([]bool, n)
	testenv.OnReplicas(n, []*store.DB{a, b}, func(i int, db *store.DB) {
		s, created, err := web.LoadSigner(t.Context(), db, replicaSessionKey, time.Now())
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
			return
		}
		keys[i], made[i] = s.KeyID(), created
	})
	makers := 0
	for i := range n {
		if keys[i] != keys[0] {
			t.Errorf("replica %d signs with %s, replica 0 with %s", i, keys[i], keys[0])
		}
		if made[i] {
			makers++
		}
	}
	if makers != 1 {
		t.Errorf("%d replicas made a key, want 1", makers)
	}
	_, _, err := web.LoadSigner(t.Context(), a, []byte("another session key of 32 bytes."), time.Now())
	if err == nil || !strings.Contains(err.Error(), "evidence signing key "+keys[0]) || !strings.Contains(err.Error(), "sealed under another session key") {
		t.Errorf("LoadSigner with another session key = %v", err)
	}
}

// TestAuditHeadPublishedOncePerDay: replicas publishing at the same moment
// publish the day once; the publication is the chain's head (read here
// through AuditHead and AuditEvents, not the publisher's query), signed
// with the installation key over signing.HeadLine, and its notice carries
// what a receiver needs to check the signature without the database; a
// later tick of the same day publishes nothing, the next day publishes
// again.
func TestAuditHeadPublishedOncePerDay(t *testing.T) {
	a, b := replicas(t)
	ctx := t.Context()
	signer, _, err := web.LoadSigner(ctx, a, replicaSessionKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 0, 3, 0, 0, time.UTC)
	for i := range 3 {
		if err := a.RecordClusterEvent(ctx, "cluster.test", workflow.Actor{Email: "admin@example.test"}, "r", now.Add(-time.Duration(3-i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	head, err := a.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newest, err := a.AuditEvents(ctx, store.AuditFilter{}, 0, 1)
	if err != nil || len(newest) != 1 || newest[0].ID != head.ID {
		t.Fatalf("newest %+v, %v", newest, err)
	}

	const n = 4
	won := make([]bool, n)
	testenv.OnReplicas(n, []*store.DB{a, b}, func(i int, db *store.DB) {
		var err error
		if _, won[i], err = publishAuditHead(ctx, db, signer, now); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	})
	winners := 0
	for _, w := range won {
		if w {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d replicas published 2026-12-04, want 1", winners)
	}
	ps, err := a.AuditHeadPublications(ctx, 10)
	if err != nil || len(ps) != 1 {
		t.Fatalf("publications %+v, %v", ps, err)
	}
	p := ps[0]
	at := evidence.AuditTime(newest[0].At)
	line := signing.HeadLine("2026-12-04", head.ID, head.Count, head.Hash, at)
	if p.Day != "2026-12-04" || p.HeadID != head.ID || p.HeadCount != head.Count || p.HeadHash != head.Hash || p.HeadAt != at || p.KeyID != signer.KeyID() {
		t.Errorf("published %+v, head %+v at %s", p, head, at)
	}
	if !signing.Verify(signer.Public(), signing.PurposeAuditHead, line, p.Signature) {
		t.Errorf("the publication's signature is not the key's over %q", line)
	}
	if ev, err := a.AuditEvents(ctx, store.AuditFilter{Action: "audit.head_published"}, 0, 10); err != nil || len(ev) != 1 || !strings.Contains(ev[0].Reason, head.Hash) {
		t.Errorf("audit events %+v, %v", ev, err)
	}

	// What the mail and the webhook carry, read as a receiver would.
	if _, err := a.DispatchOutbox(ctx, []store.Channel{store.ChannelEmail, store.ChannelWebhook}, now, 10); err != nil {
		t.Fatal(err)
	}
	dl, ok, err := a.ClaimDelivery(ctx, store.ChannelWebhook, now, time.Minute)
	if err != nil || !ok || dl.Kind != "audit.head_published" || !strings.Contains(dl.Subject, head.Hash) {
		t.Fatalf("webhook delivery %+v, %v, %v", dl, ok, err)
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(dl.Body))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			fields[k] = v
		}
	}
	sig := fields[`signature (Ed25519, base64, over "hyperpod-portal/audit-head\n" + signed_text)`]
	if fields["signed_text"] != line || fields["head_hash"] != head.Hash || fields["key_id"] != signer.KeyID() ||
		!signing.Verify(signer.Public(), signing.PurposeAuditHead, fields["signed_text"], sig) {
		t.Errorf("the notice's body does not let a receiver check the head:\n%s", dl.Body)
	}

	// The receiver checks the message with the published key alone.
	doc, _ := json.MarshalIndent(signer.Published(), "", "  ")
	keyFile := tempFile(t, "key.json", doc)
	var out, errOut bytes.Buffer
	noEnv := func(string) string { return "" }
	if err := run(ctx, []string{"evidence", "verify-head", "--key-file", keyFile, fields["signed_text"], sig}, noEnv, &out, &errOut); err != nil ||
		!strings.Contains(out.String(), "OK: the audit head \""+line+"\" is signed by the trusted key "+signer.KeyID()) {
		t.Errorf("verify-head of the notice = %v\n%s%s", err, out.String(), errOut.String())
	}
	forged := strings.Replace(fields["signed_text"], "count=", "count=1", 1)
	for _, args := range [][]string{
		{"evidence", "verify-head", "--key-file", keyFile, forged, sig},
		{"evidence", "verify-head", "--key", signing.EncodePublic(testSigner(t).Public()), fields["signed_text"], sig},
		{"evidence", "verify-head", fields["signed_text"], sig},
		{"evidence", "verify-head", "--key-file", keyFile, fields["signed_text"]},
	} {
		if err := run(ctx, args, noEnv, &out, &errOut); err == nil {
			t.Errorf("portal %v succeeded", args)
		}
	}

	// Later the same day: nothing. The next day: the head then, which is
	// the first publication's own audit event.
	if _, ok, err := publishAuditHead(ctx, b, signer, now.Add(20*time.Hour)); ok || err != nil {
		t.Errorf("a second publication on 2026-12-04: %v, %v", ok, err)
	}
	p2, ok, err := publishAuditHead(ctx, b, signer, now.Add(24*time.Hour))
	if err != nil || !ok || p2.Day != "2026-12-05" || p2.HeadID != head.ID+1 {
		t.Errorf("2026-12-05: %+v, %v, %v", p2, ok, err)
	}
}
