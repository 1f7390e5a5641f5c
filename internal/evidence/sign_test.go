package evidence

import (
	"crypto/rand"
	"slices"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/signing"
)

// newKey makes a signing key as the portal does: generated, sealed under a
// session key, opened.
func newKey(sessionKey string) *signing.Signer {
	s, err := signing.Generate(rand.Reader, []byte(sessionKey), t0)
	if err != nil {
		panic(err)
	}
	sg, err := signing.Open(s, []byte(sessionKey))
	if err != nil {
		panic(err)
	}
	return sg
}

var (
	portalKey = newKey("the portal's session key, 32 bytes")
	forgerKey = newKey("a forger's own session key, 32 b.")
)

// forge rewrites a bundle the way someone who knows the format would:
// every hash recomputed, and signed again with a key of their own.
func forge(t *testing.T, b Bundle, change func(*Bundle)) []byte {
	t.Helper()
	change(&b)
	h, err := Hash(b)
	if err != nil {
		t.Fatal(err)
	}
	b.BundleHash = h
	if err := Sign(&b, forgerKey); err != nil {
		t.Fatal(err)
	}
	data, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func trusted(k *signing.Signer) Options { return Options{TrustedKey: k.Public()} }

// TestSignedBundle: a bundle as the portal signs it verifies against the
// portal's key, and says so; without a key it verifies with a note that
// the signature was not checked against a trusted key.
func TestSignedBundle(t *testing.T) {
	b, data := sampleBundle(t)
	rep := VerifyWith(data, trusted(portalKey))
	if !rep.OK() || !rep.SignedByTrustedKey {
		t.Fatalf("the portal's bundle against the portal's key: %v (signed by trusted key %v)", rep.Failures, rep.SignedByTrustedKey)
	}
	if !strings.Contains(strings.Join(rep.Checked, "\n"), "signature by the trusted key "+portalKey.KeyID()) {
		t.Errorf("checks: %v", rep.Checked)
	}
	if b.Signature.KeyID != portalKey.KeyID() || b.Signature.Covers != "hyperpod-portal/evidence-bundle\n"+b.BundleHash {
		t.Errorf("signature %+v", b.Signature)
	}
	// The signature is an Ed25519 signature of exactly that text, checked
	// here with the standard library alone.
	if !signing.Verify(portalKey.Public(), signing.PurposeEvidenceBundle, b.BundleHash, b.Signature.Value) {
		t.Error("the signature is not the portal key's signature of the bundle hash")
	}
	rep = Verify(data)
	if !rep.OK() || rep.SignedByTrustedKey || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "NOT checked against a trusted key") {
		t.Errorf("without a key: ok %v, trusted %v, notes %v", rep.OK(), rep.SignedByTrustedKey, rep.Notes)
	}
}

// TestForgedBundleRefusedWithKey: the rule of issue 31 item 11. A bundle
// rewritten with every hash recomputed and signed by the forger's own key
// passes the checks of the file alone (which is why they never say who
// made it), and is refused against the portal's key; one whose hashes were
// recomputed but not signed again is refused by anyone.
func TestForgedBundleRefusedWithKey(t *testing.T) {
	b, _ := sampleBundle(t)
	forged := forge(t, b, func(b *Bundle) {
		b.Decisions = slices.Clone(b.Decisions)
		b.Decisions[0].Reason = "approved without looking"
	})
	if rep := Verify(forged); !rep.OK() || rep.SignedByTrustedKey {
		t.Fatalf("the forged bundle fails the file's own checks (%v): the test does not forge well enough", rep.Failures)
	}
	rep := VerifyWith(forged, trusted(portalKey))
	if rep.OK() || !strings.Contains(rep.Err().Error(), "signed by key "+forgerKey.KeyID()+", not by the trusted key "+portalKey.KeyID()) {
		t.Errorf("the forged bundle against the portal's key: %v", rep.Err())
	}

	// Hashes recomputed, the portal's signature kept.
	c := b
	c.Decisions = slices.Clone(b.Decisions)
	c.Decisions[0].Reason = "approved without looking"
	rehashed := resign(t, c)
	for name, rep := range map[string]Report{"without a key": Verify(rehashed), "with the key": VerifyWith(rehashed, trusted(portalKey))} {
		if rep.OK() || !strings.Contains(rep.Err().Error(), "the bundle was changed after it was signed") {
			t.Errorf("%s: rehashed bundle: %v", name, rep.Err())
		}
	}
}

// TestWrongKeyRefused: the portal's own bundle checked against another key
// is refused (the key given is not the one that signed).
func TestWrongKeyRefused(t *testing.T) {
	_, data := sampleBundle(t)
	rep := VerifyWith(data, trusted(forgerKey))
	if rep.OK() || rep.SignedByTrustedKey || !strings.Contains(rep.Err().Error(), "not by the trusted key "+forgerKey.KeyID()) {
		t.Errorf("against another key: %v", rep.Err())
	}
}

// TestSignatureFieldsRefused: a signature removed, one naming another key
// id, one whose covers text is not the bundle hash's, and an unsigned
// format 1 bundle: what each check refuses, and what a format 1 bundle
// says without a key.
func TestSignatureFieldsRefused(t *testing.T) {
	b, _ := sampleBundle(t)
	for _, tc := range []struct {
		name   string
		change func(b *Bundle)
		opts   Options
		want   string
	}{
		{"signature removed", func(b *Bundle) { b.Signature = nil }, Options{}, "has no signature (it was removed)"},
		{"key id of another key", func(b *Bundle) { s := *b.Signature; s.KeyID = forgerKey.KeyID(); b.Signature = &s }, Options{}, "does not name the public_key"},
		{"public key swapped, id kept", func(b *Bundle) {
			s := *b.Signature
			s.PublicKey = signing.EncodePublic(forgerKey.Public())
			b.Signature = &s
		}, Options{}, "does not name the public_key"},
		{"covers another text", func(b *Bundle) {
			s := *b.Signature
			s.Covers = "hyperpod-portal/audit-head\n" + b.BundleHash
			b.Signature = &s
		}, Options{}, "not the bundle hash's signed text"},
		{"another algorithm", func(b *Bundle) { s := *b.Signature; s.Algorithm = "rsa"; b.Signature = &s }, Options{}, "algorithm \"rsa\""},
		{"format 1 with a signature", func(b *Bundle) { b.FormatVersion = 1 }, Options{}, "format 1 bundles are unsigned"},
		{"format 1, unsigned, against the key", func(b *Bundle) { b.FormatVersion, b.Signature = 1, nil }, trusted(portalKey), "unsigned (format 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := b
			tc.change(&c)
			// The bundle hash covers no signature: only the format
			// changes move it.
			rep := VerifyWith(resign(t, c), tc.opts)
			if rep.OK() || !strings.Contains(rep.Err().Error(), tc.want) {
				t.Errorf("%v; want a failure saying %q", rep.Err(), tc.want)
			}
		})
	}
	// An unsigned format 1 bundle (made before signing) still verifies
	// without a key, saying nothing shows who made it.
	c := b
	c.FormatVersion, c.Signature = 1, nil
	data := resign(t, c)
	if rep := Verify(data); !rep.OK() || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "nothing shows who made it") {
		t.Errorf("format 1 without a key: %v, notes %v", rep.Failures, rep.Notes)
	}
}

// TestAuditHead: a published head compared with the bundle's chain where
// they meet, against the chain the sample was cut from (sampleChain: the
// connection's events are 1, 2, 3, 5 of 6; the head at export is 6).
func TestAuditHead(t *testing.T) {
	_, data := sampleBundle(t)
	chain := sampleChain()
	hash := func(id int) string { return chain[id-1].Hash }
	other := strings.Repeat("e", 64)
	for _, tc := range []struct {
		name     string
		head     HeadRef
		fail     string // "" for none
		pass     string
		noteWant string
	}{
		{"the head at export", HeadRef{6, hash(6)}, "", "agrees with the bundle's chain where they meet", ""},
		{"the head at export, another hash", HeadRef{6, other}, "the chain head at export is event 6", "", ""},
		{"an event of the bundle", HeadRef{5, hash(5)}, "", "agrees", ""},
		{"an event of the bundle, another hash", HeadRef{3, other}, "event 3 has hash", "", ""},
		{"another connection's event, followed by one of the bundle", HeadRef{4, hash(4)}, "", "agrees", ""},
		{"another hash before an event of the bundle", HeadRef{4, other}, "event 5 follows event 4", "", ""},
		{"published after the export", HeadRef{9, other}, "", "", "before the published head (event 9)"},
		{"hash only, in the bundle", HeadRef{0, hash(2)}, "", "is the bundle's event 2", ""},
		{"hash only, the head", HeadRef{0, hash(6)}, "", "is the bundle's chain head at export", ""},
		{"hash only, unknown", HeadRef{0, other}, "", "", "neither the bundle's chain head at export nor one of its events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.head
			rep := VerifyWith(data, Options{TrustedKey: portalKey.Public(), AuditHead: &h})
			if tc.fail != "" {
				if rep.OK() || !strings.Contains(rep.Err().Error(), tc.fail) {
					t.Errorf("%v; want a failure saying %q", rep.Err(), tc.fail)
				}
				return
			}
			if !rep.OK() {
				t.Fatalf("refused: %v", rep.Failures)
			}
			if tc.pass != "" && !strings.Contains(strings.Join(rep.Checked, "\n"), tc.pass) {
				t.Errorf("checks lack %q: %v", tc.pass, rep.Checked)
			}
			if tc.noteWant != "" && !strings.Contains(strings.Join(rep.Notes, "\n"), tc.noteWant) {
				t.Errorf("notes lack %q: %v", tc.noteWant, rep.Notes)
			}
		})
	}
	// Published before the export, with no event of the bundle at or
	// right after it: nothing to compare offline, and it says so.
	b, _ := sampleBundle(t)
	b.Audit.Events = b.Audit.Events[2:] // events 3 and 5
	data = func() []byte {
		h, _ := Hash(b)
		b.BundleHash = h
		if err := Sign(&b, portalKey); err != nil {
			t.Fatal(err)
		}
		d, _ := Encode(b)
		return d
	}()
	rep := VerifyWith(data, Options{AuditHead: &HeadRef{1, hash(1)}})
	if !rep.OK() || !strings.Contains(strings.Join(rep.Notes, "\n"), "after the published head (event 1)") {
		t.Errorf("head before the export: %v, notes %v", rep.Failures, rep.Notes)
	}
}

func TestParseHeadRef(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for in, want := range map[string]HeadRef{"12:" + h: {12, h}, h: {0, h}, " 3:" + h + "\n": {3, h}} {
		if got, err := ParseHeadRef(in); err != nil || got != want {
			t.Errorf("ParseHeadRef(%q) = %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "12", "0:" + h, "-1:" + h, "x:" + h, "12:" + strings.ToUpper(h), h[:63], "12:" + h + "0"} {
		if _, err := ParseHeadRef(bad); err == nil {
			t.Errorf("ParseHeadRef(%q) accepted", bad)
		}
	}
}
