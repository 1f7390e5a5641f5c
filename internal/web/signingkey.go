package web

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
)

// EvidenceKeyPath is where the installation's public signing key is
// published: no login, so that anyone holding an evidence bundle or a
// published audit head can fetch the key that checks it.
const EvidenceKeyPath = "/.well-known/hyperpod-portal/evidence-key"

// LoadSigner returns the installation's signing key (internal/signing):
// the one in the database, or, when there is none, a new one this process
// makes and the store inserts only if no replica inserted one first
// (store.DB.EnsureSigningKey; the winner's key is the one returned). The
// private key is opened with the session key; a key sealed under another
// session key is an error, not a reason to make a new key: bundles already
// handed out name the old one. created says this call made the key.
func LoadSigner(ctx context.Context, db *store.DB, sessionKey []byte, now time.Time) (s *signing.Signer, created bool, err error) {
	cand, err := signing.Generate(rand.Reader, sessionKey, now)
	if err != nil {
		return nil, false, err
	}
	row, created, err := db.EnsureSigningKey(ctx, cand, now)
	if err != nil {
		return nil, false, err
	}
	s, err = signing.Open(row, sessionKey)
	if err != nil {
		return nil, false, fmt.Errorf("evidence signing key %s: %w: start with the session key file it was made under (docs/security.md, Evidence signing key)", row.KeyID, err)
	}
	return s, created, nil
}

// Signer is the key the server signs evidence bundles with.
func (s *Server) Signer() *signing.Signer { return s.opts.Signer }

// evidenceKey serves the public key as JSON (signing.PublicKey): what
// `portal evidence verify --key-file` reads. Like every response but the
// static assets it is no-store: a key replaced (it is not rotated today)
// must not linger in a cache.
func (s *Server) evidenceKey(c echo.Context) error {
	return c.JSONPretty(http.StatusOK, s.opts.Signer.Published(), "  ")
}
