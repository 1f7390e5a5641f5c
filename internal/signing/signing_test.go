package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var (
	sessionKey = []byte("0123456789abcdef0123456789abcdef")
	now        = time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
)

func newSigner(t *testing.T) (*Signer, Sealed) {
	t.Helper()
	s, err := Generate(rand.Reader, sessionKey, now)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := Open(s, sessionKey)
	if err != nil {
		t.Fatal(err)
	}
	return sg, s
}

// TestSealedKey: the stored row opens only with the session key it was
// sealed under, and only as the key its public half and id name.
func TestSealedKey(t *testing.T) {
	sg, s := newSigner(t)
	if sg.KeyID() != s.KeyID || EncodePublic(sg.Public()) != s.Public || !sg.CreatedAt().Equal(now) {
		t.Fatalf("opened %s %s, stored %s %s", sg.KeyID(), EncodePublic(sg.Public()), s.KeyID, s.Public)
	}
	if strings.Contains(s.Private, base64.StdEncoding.EncodeToString(sg.priv.Seed())) {
		t.Fatal("the stored private key is the seed in the clear")
	}
	other, _ := newSigner(t)
	for name, row := range map[string]Sealed{
		"another session key": s,
		"public half swapped": {KeyID: s.KeyID, Public: EncodePublic(other.Public()), Private: s.Private, CreatedAt: now},
		"key id of another":   {KeyID: other.KeyID(), Public: EncodePublic(other.Public()), Private: s.Private, CreatedAt: now},
		"private not base64":  {KeyID: s.KeyID, Public: s.Public, Private: "!!", CreatedAt: now},
		"private truncated":   {KeyID: s.KeyID, Public: s.Public, Private: s.Private[:20], CreatedAt: now},
	} {
		key := sessionKey
		if name == "another session key" {
			key = []byte("another key, 32 bytes long......")
		}
		if _, err := Open(row, key); !errors.Is(err, ErrSealedElsewhere) {
			t.Errorf("%s: Open = %v, want ErrSealedElsewhere", name, err)
		}
	}
	// Neither printing nor logging a signer writes its private key.
	for _, out := range []string{fmt.Sprint(sg), fmt.Sprintf("%v %+v %#v %s", sg, sg, sg, sg)} {
		if strings.Contains(out, hex.EncodeToString(sg.priv.Seed())) || strings.Contains(out, base64.StdEncoding.EncodeToString(sg.priv)) || !strings.Contains(out, sg.KeyID()) {
			t.Errorf("printed signer: %q", out)
		}
	}
}

// TestSignatures: a signature is Ed25519 over "hyperpod-portal/<purpose>\n"
// and the message (checked with crypto/ed25519 directly), and is refused
// for another purpose, another message or another key.
func TestSignatures(t *testing.T) {
	sg, _ := newSigner(t)
	other, _ := newSigner(t)
	sig := sg.Sign(PurposeEvidenceBundle, "abc")
	raw, _ := base64.StdEncoding.DecodeString(sig)
	if !ed25519.Verify(sg.Public(), []byte("hyperpod-portal/evidence-bundle\nabc"), raw) {
		t.Fatal("the signature is not over the documented text")
	}
	if !Verify(sg.Public(), PurposeEvidenceBundle, "abc", sig) {
		t.Error("Verify refused a good signature")
	}
	for name, ok := range map[string]bool{
		"another purpose": Verify(sg.Public(), PurposeAuditHead, "abc", sig),
		"another message": Verify(sg.Public(), PurposeEvidenceBundle, "abd", sig),
		"another key":     Verify(other.Public(), PurposeEvidenceBundle, "abc", sig),
		"not base64":      Verify(sg.Public(), PurposeEvidenceBundle, "abc", "%%"),
		"short key":       Verify(sg.Public()[:31], PurposeEvidenceBundle, "abc", sig),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestParsePublic: the published document, base64 and hex all read back
// as the key; a document whose id does not name its key, or another
// algorithm, is refused.
func TestParsePublic(t *testing.T) {
	sg, _ := newSigner(t)
	doc, err := json.MarshalIndent(sg.Published(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	pub := sg.Public()
	for _, in := range []string{string(doc), EncodePublic(pub) + "\n", base64.RawURLEncoding.EncodeToString(pub), hex.EncodeToString(pub)} {
		got, err := ParsePublic(in)
		if err != nil || !got.Equal(pub) {
			t.Errorf("ParsePublic(%.40q) = %v, %v", in, got, err)
		}
	}
	other, _ := newSigner(t)
	wrongID := strings.Replace(string(doc), sg.KeyID(), other.KeyID(), 1)
	wrongAlg := strings.Replace(string(doc), `"algorithm": "ed25519"`, `"algorithm": "rsa"`, 1)
	for _, bad := range []string{wrongID, wrongAlg, "", "abc", EncodePublic(pub[:31]), "{"} {
		if _, err := ParsePublic(bad); err == nil {
			t.Errorf("ParsePublic(%.60q) accepted", bad)
		}
	}
	if p := sg.Published(); p.Format != PublicKeyFormat || p.Algorithm != "ed25519" || p.KeyID != KeyID(pub) || p.CreatedAt != "2026-12-04T09:00:00Z" {
		t.Errorf("published %+v", p)
	}
	if !strings.HasPrefix(sg.KeyID(), "ed25519:") || len(sg.KeyID()) != len("ed25519:")+16 {
		t.Errorf("key id %q", sg.KeyID())
	}
}
