package evidence

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hyperpod-governance/portal/internal/signing"
)

// Sign signs a built bundle's hash with the installation key: the bundle's
// Signature, over "hyperpod-portal/evidence-bundle\n" + BundleHash.
func Sign(b *Bundle, s *signing.Signer) error {
	if s == nil {
		return errors.New("evidence: no signing key")
	}
	if !isHash(b.BundleHash) {
		return errors.New("evidence: sign: the bundle has no hash (Build it first)")
	}
	b.Signature = &Signature{Algorithm: signing.Algorithm, KeyID: s.KeyID(), PublicKey: signing.EncodePublic(s.Public()),
		Covers: covers(b.BundleHash), Value: s.Sign(signing.PurposeEvidenceBundle, b.BundleHash)}
	return nil
}

// covers is the text a bundle's signature is made over, as written in the
// bundle: the purpose line and the bundle hash.
func covers(bundleHash string) string {
	return string(signing.Message(signing.PurposeEvidenceBundle, bundleHash))
}

// Options are what a verifier trusts beyond the file: the portal's
// published public key, and a head of the audit chain the portal
// published. The zero Options check the file alone.
type Options struct {
	// TrustedKey is the portal's published key; nil: the signature is
	// checked only against the key the file names, which proves nothing
	// about who made it.
	TrustedKey ed25519.PublicKey
	// AuditHead is a published head; nil: none.
	AuditHead *HeadRef
}

// HeadRef is a published audit chain head: its event id (0: not given)
// and hash.
type HeadRef struct {
	ID   int64
	Hash string
}

// ParseHeadRef reads "ID:HASH" (as the daily publication prints it) or a
// bare HASH.
func ParseHeadRef(s string) (HeadRef, error) {
	s = strings.TrimSpace(s)
	var h HeadRef
	if id, hash, ok := strings.Cut(s, ":"); ok {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n <= 0 {
			return h, fmt.Errorf("audit head %q: the id before ':' is not a positive event id", s)
		}
		h.ID, s = n, hash
	}
	if !isHash(s) {
		return h, fmt.Errorf("audit head: %q is not a SHA-256 hash (64 lower-case hex digits, as the daily publication and `portal audit head` print)", s)
	}
	h.Hash = s
	return h, nil
}

// verifySignature checks the bundle's signature: against the key the file
// names always (a signature that does not match the bundle hash is refused
// whoever checks), and against the trusted key when given (a bundle signed
// by any other key, or unsigned, is refused).
func verifySignature(r *Report, b Bundle, trusted ed25519.PublicKey) {
	sig := b.Signature
	switch {
	case b.FormatVersion == formatUnsigned && sig != nil:
		r.fail("signature: format 1 bundles are unsigned; this one carries a signature")
		return
	case sig == nil && b.FormatVersion == formatUnsigned && trusted == nil:
		r.note("the bundle is format 1, made before bundles were signed: nothing shows who made it")
		return
	case sig == nil && b.FormatVersion == formatUnsigned:
		r.fail("signature: the bundle is unsigned (format 1), so it cannot be checked against the trusted key")
		return
	case sig == nil:
		r.fail("signature: a format %d bundle is signed, and this one has no signature (it was removed)", b.FormatVersion)
		return
	}
	raw, err := base64.StdEncoding.DecodeString(sig.PublicKey)
	pub := ed25519.PublicKey(raw)
	switch {
	case sig.Algorithm != signing.Algorithm:
		r.fail("signature: algorithm %q, this verifier reads %q", sig.Algorithm, signing.Algorithm)
		return
	case err != nil || len(raw) != ed25519.PublicKeySize:
		r.fail("signature: public_key is not an Ed25519 public key in base64")
		return
	case sig.KeyID != signing.KeyID(pub):
		r.fail("signature: key_id %q does not name the public_key the bundle carries (%s)", sig.KeyID, signing.KeyID(pub))
		return
	case !signing.Verify(pub, signing.PurposeEvidenceBundle, b.BundleHash, sig.Value):
		r.fail("signature: not key %s's signature of the bundle hash: the bundle was changed after it was signed", sig.KeyID)
		return
	case sig.Covers != covers(b.BundleHash):
		r.fail("signature: covers %q, not the bundle hash's signed text", sig.Covers)
		return
	}
	if trusted == nil {
		r.pass("signature by key %s over the bundle hash is valid for the public key the file carries", sig.KeyID)
		r.note("the signature was NOT checked against a trusted key: a forger signs with a key of their own. Give the portal's published key (--key-file, from /.well-known/hyperpod-portal/evidence-key or the README) to learn who made the bundle")
		return
	}
	if !pub.Equal(trusted) {
		r.fail("signature: the bundle is signed by key %s, not by the trusted key %s: the portal did not make this file (or the key given is not the portal's)", sig.KeyID, signing.KeyID(trusted))
		return
	}
	r.pass("signature by the trusted key %s over the bundle hash: the holder of the portal's key made this file", sig.KeyID)
	r.SignedByTrustedKey = true
}

// verifyAuditHead compares the bundle's chain with a published head,
// wherever they meet; where they do not, it says what offline data cannot
// show.
func verifyAuditHead(r *Report, b Bundle, h HeadRef) {
	head := b.Audit.Head
	met := false
	mismatch := func(what string) {
		r.fail("audit head %s: %s: the bundle's chain and the published chain differ (one of them was rewritten)", short(h), what)
	}
	if h.ID == 0 {
		for _, e := range b.Audit.Events {
			if e.Hash == h.Hash {
				r.pass("the published audit head %s is the bundle's event %d", h.Hash, e.ID)
				return
			}
		}
		if head.Hash == h.Hash {
			r.pass("the published audit head %s is the bundle's chain head at export (event %d)", h.Hash, head.ID)
			return
		}
		r.note("the published audit head %s (no event id given) is neither the bundle's chain head at export nor one of its events; give ID:HASH to compare positions, or check it against the portal with `portal audit verify --head %s`", h.Hash, h.Hash)
		return
	}
	if head.ID == h.ID {
		met = true
		if head.Hash != h.Hash {
			mismatch(fmt.Sprintf("the chain head at export is event %d with hash %s, the published head's hash there is %s", head.ID, head.Hash, h.Hash))
			return
		}
	}
	for _, e := range b.Audit.Events {
		switch {
		case e.ID == h.ID && e.Hash != h.Hash:
			mismatch(fmt.Sprintf("event %d has hash %s", e.ID, e.Hash))
			return
		case e.ID == h.ID+1 && e.PrevHash != h.Hash:
			mismatch(fmt.Sprintf("event %d follows event %d with prev_hash %s", e.ID, h.ID, e.PrevHash))
			return
		case e.ID == h.ID || e.ID == h.ID+1:
			met = true
		}
	}
	switch {
	case met:
		r.pass("the published audit head (event %d, %s) agrees with the bundle's chain where they meet", h.ID, h.Hash)
	case head.ID < h.ID:
		r.note("the bundle was exported at chain head event %d, before the published head (event %d): offline data cannot show that the chain the portal published later still holds the bundle's events; `portal audit verify --head %s` on the portal's database shows the chain up to it is intact, and the audit page shows the events' hashes to compare", head.ID, h.ID, h.Hash)
	default:
		r.note("the bundle was exported at chain head event %d, after the published head (event %d), and carries neither that event nor the next: offline data cannot show that its events older than event %d are in the published chain; `portal audit verify --head %s` on the portal's database checks the chain up to it", head.ID, h.ID, h.ID, h.Hash)
	}
}

func short(h HeadRef) string {
	if h.ID == 0 {
		return h.Hash
	}
	return strconv.FormatInt(h.ID, 10) + ":" + h.Hash
}
