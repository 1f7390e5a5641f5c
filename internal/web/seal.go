package web

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
)

// sealer encrypts and authenticates small values under a key derived from
// the session key (AES-256-GCM). Each purpose gets its own key and the
// purpose is bound as additional data, so a value sealed for one use (the
// login-state cookie, a token kept in the session) is refused for another.
type sealer struct {
	aead    cipher.AEAD
	purpose []byte
}

func newSealer(sessionKey []byte, purpose string) sealer {
	m := hmac.New(sha256.New, sessionKey)
	m.Write([]byte("hyperpod-portal seal v1: " + purpose))
	block, err := aes.NewCipher(m.Sum(nil)) // 32 bytes: AES-256
	if err != nil {
		panic(err) // unreachable: the key is always 32 bytes
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return sealer{aead: aead, purpose: []byte(purpose)}
}

func (s sealer) seal(plain []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return s.aead.Seal(nonce, nonce, plain, s.purpose)
}

var errUnsealed = errors.New("sealed value is damaged or was sealed under another key")

func (s sealer) open(sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, errUnsealed
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], s.purpose)
	if err != nil {
		return nil, errUnsealed
	}
	return plain, nil
}

func (s sealer) sealString(v string) string {
	return base64.RawURLEncoding.EncodeToString(s.seal([]byte(v)))
}

func (s sealer) openString(v string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return "", errUnsealed
	}
	p, err := s.open(b)
	return string(p), err
}
