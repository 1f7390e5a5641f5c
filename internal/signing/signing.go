// Package signing is the installation's signing key: an Ed25519 key pair
// (RFC 8032, Go's crypto/ed25519) that the portal makes once, keeps in its
// database with the private half sealed under the session key, and signs
// its evidence bundles and its daily audit chain heads with. Its public half
// is published at /.well-known/hyperpod-portal/evidence-key, so that anyone
// holding a bundle or a published head can check, without trusting the
// portal's database, that the portal made it.
//
// Every signature covers a message with a purpose ("evidence-bundle",
// "audit-head") written before it, so a signature made for one purpose is
// refused for another.
//
// The package is pure: it reads no database. internal/store keeps the key's
// row (store.DB.EnsureSigningKey) and internal/web loads it (web.LoadSigner).
package signing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Algorithm names the signature scheme wherever a key or signature is
// written down.
const Algorithm = "ed25519"

// The purposes a signature is made for.
const (
	PurposeEvidenceBundle = "evidence-bundle"
	PurposeAuditHead      = "audit-head"
)

// Message is the exact bytes signed for purpose: the purpose, a line break,
// the message. Anyone can rebuild it to check a signature with another
// Ed25519 tool: "hyperpod-portal/<purpose>\n<message>".
func Message(purpose, msg string) []byte {
	return []byte("hyperpod-portal/" + purpose + "\n" + msg)
}

// KeyID names a public key: "ed25519:" and the first 16 hex digits of the
// SHA-256 of its 32 bytes.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return Algorithm + ":" + hex.EncodeToString(sum[:8])
}

// EncodePublic is how a public key is written: standard base64 of its 32
// bytes.
func EncodePublic(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// PublicKey is the public half as published: what the well-known page
// serves, and what `portal evidence verify --key-file` reads back.
type PublicKey struct {
	Format    string `json:"format"`
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
	CreatedAt string `json:"created_at"`
	Signs     string `json:"signs"`
}

// PublicKeyFormat names the published key's document.
const PublicKeyFormat = "hyperpod-portal-signing-key"

// ParsePublic reads a public key given as its base64 (standard or URL,
// padded or not), as 64 hex digits, or as the well-known page's JSON
// document (whose key_id must then name it).
func ParsePublic(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		var doc PublicKey
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			return nil, fmt.Errorf("signing key: not the portal's key document: %w", err)
		}
		if doc.Algorithm != Algorithm {
			return nil, fmt.Errorf("signing key: algorithm %q, this verifier reads %q", doc.Algorithm, Algorithm)
		}
		pub, err := ParsePublic(doc.PublicKey)
		if err != nil {
			return nil, err
		}
		if doc.KeyID != KeyID(pub) {
			return nil, fmt.Errorf("signing key: the document's key_id %q does not name its public_key (%s)", doc.KeyID, KeyID(pub))
		}
		return pub, nil
	}
	for _, dec := range []func(string) ([]byte, error){
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString,
	} {
		if b, err := dec(s); err == nil && len(b) == ed25519.PublicKeySize {
			return ed25519.PublicKey(b), nil
		}
	}
	return nil, errors.New("signing key: not an Ed25519 public key (32 bytes as base64 or hex, or the JSON of /.well-known/hyperpod-portal/evidence-key)")
}

// Verify reports whether sig (base64) is pub's signature of msg for
// purpose.
func Verify(pub ed25519.PublicKey, purpose, msg, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize || len(pub) != ed25519.PublicKeySize {
		return false
	}
	return ed25519.Verify(pub, Message(purpose, msg), raw)
}

// Signer holds the private key. Its String and GoString name only the key
// id, so that logging a Signer never writes the private key.
type Signer struct {
	priv      ed25519.PrivateKey
	createdAt time.Time
}

// Public is the public half.
func (s *Signer) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// KeyID is the public half's id.
func (s *Signer) KeyID() string { return KeyID(s.Public()) }

// CreatedAt is when the key was made.
func (s *Signer) CreatedAt() time.Time { return s.createdAt }

// Sign signs msg for purpose and returns the signature as base64.
func (s *Signer) Sign(purpose, msg string) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, Message(purpose, msg)))
}

// Published is the public key's document, for the well-known page.
func (s *Signer) Published() PublicKey {
	return PublicKey{Format: PublicKeyFormat, Algorithm: Algorithm, KeyID: s.KeyID(), PublicKey: EncodePublic(s.Public()),
		CreatedAt: s.createdAt.UTC().Format(time.RFC3339),
		Signs: "The portal's evidence bundles (signature over \"hyperpod-portal/" + PurposeEvidenceBundle + "\\n\" + bundle_hash) and its daily audit chain heads (\"hyperpod-portal/" + PurposeAuditHead +
			"\\n\" + the head line). Check a bundle with `portal evidence verify --key-file FILE BUNDLE`, FILE being this document."}
}

func (s *Signer) String() string   { return "signing key " + s.KeyID() }
func (s *Signer) GoString() string { return s.String() }

// Sealed is a key as the database keeps it: the public half in the open,
// the private key's seed sealed (AES-256-GCM) under a key derived from the
// session key, bound to the key id.
type Sealed struct {
	KeyID     string
	Public    string // EncodePublic
	Private   string // base64 of nonce and sealed seed
	CreatedAt time.Time
}

// Generate makes a new key pair and seals it under sessionKey.
func Generate(random io.Reader, sessionKey []byte, now time.Time) (Sealed, error) {
	pub, priv, err := ed25519.GenerateKey(random)
	if err != nil {
		return Sealed{}, fmt.Errorf("signing key: %w", err)
	}
	id := KeyID(pub)
	aead := sealAEAD(sessionKey)
	nonce := make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(random, nonce); err != nil {
		return Sealed{}, fmt.Errorf("signing key: %w", err)
	}
	box := aead.Seal(nonce, nonce, priv.Seed(), []byte(id))
	return Sealed{KeyID: id, Public: EncodePublic(pub), Private: base64.StdEncoding.EncodeToString(box), CreatedAt: now.UTC()}, nil
}

// ErrSealedElsewhere: the stored key was sealed under another session key
// (or its row was changed), so this process cannot sign with it.
var ErrSealedElsewhere = errors.New("the evidence signing key in the database was sealed under another session key, or its row was altered")

// Open unseals a stored key with sessionKey and checks that its private
// half is the public key and key id the row shows.
func Open(s Sealed, sessionKey []byte) (*Signer, error) {
	box, err := base64.StdEncoding.DecodeString(s.Private)
	aead := sealAEAD(sessionKey)
	if err != nil || len(box) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrSealedElsewhere
	}
	n := aead.NonceSize()
	seed, err := aead.Open(nil, box[:n], box[n:], []byte(s.KeyID))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, ErrSealedElsewhere
	}
	sg := &Signer{priv: ed25519.NewKeyFromSeed(seed), createdAt: s.CreatedAt}
	if sg.KeyID() != s.KeyID || EncodePublic(sg.Public()) != s.Public {
		return nil, ErrSealedElsewhere
	}
	return sg, nil
}

// sealAEAD is AES-256-GCM under HMAC-SHA256(sessionKey, label): the
// derivation internal/web's sealer uses for its own purposes, with a label
// of this one.
func sealAEAD(sessionKey []byte) cipher.AEAD {
	m := hmac.New(sha256.New, sessionKey)
	m.Write([]byte("hyperpod-portal seal v1: evidence signing key"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		panic(err) // unreachable: the key is 32 bytes
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// HeadLine is the text a published audit head's signature covers: the UTC
// day, the head event's id, the number of events up to it, its hash and its
// time (TimeLayout of internal/evidence), space-separated.
func HeadLine(day string, id int64, count int, hash, at string) string {
	return fmt.Sprintf("day=%s id=%d count=%d hash=%s at=%s", day, id, count, hash, at)
}
