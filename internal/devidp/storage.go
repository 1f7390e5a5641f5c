package devidp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Errors of the login step; the login page answers each with a 400 page.
var (
	errUnknownAuthRequest = errors.New("unknown or expired sign-in request")
	errAuthRequestDone    = errors.New("this sign-in request has already been completed")
	errUnknownUser        = errors.New("unknown user")
)

// authRequest is one authorization request, from /authorize until its code
// is redeemed (or it expires). The storage hands out copies (values), never
// the stored pointer, so the op never reads fields the login page may write.
type authRequest struct {
	id            string
	created       time.Time
	clientID      string
	redirectURI   string
	state         string
	nonce         string
	scopes        []string
	responseType  oidc.ResponseType
	responseMode  oidc.ResponseMode
	codeChallenge *oidc.CodeChallenge

	// Set by the login page.
	done     bool
	subject  string
	authTime time.Time

	// code is the one code issued for this request ("" until issued).
	code string
}

var _ op.AuthRequest = authRequest{}

func (a authRequest) GetID() string                         { return a.id }
func (a authRequest) GetACR() string                        { return "" }
func (a authRequest) GetAMR() []string                      { return nil }
func (a authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a authRequest) GetClientID() string                   { return a.clientID }
func (a authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.codeChallenge }
func (a authRequest) GetNonce() string                      { return a.nonce }
func (a authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a authRequest) GetScopes() []string                   { return slices.Clone(a.scopes) }
func (a authRequest) GetState() string                      { return a.state }
func (a authRequest) GetSubject() string                    { return a.subject }
func (a authRequest) Done() bool                            { return a.done }
func (a authRequest) expired(now time.Time) bool            { return now.Sub(a.created) > authRequestTTL }
func (a authRequest) snapshot() authRequest                 { a.scopes = slices.Clone(a.scopes); return a }

type authCode struct {
	authRequestID string
	expires       time.Time
}

type accessToken struct {
	id            string
	subject       string
	clientID      string
	scopes        []string
	expires       time.Time
	authRequestID string
}

// storage implements op.Storage in memory. One mutex guards everything.
type storage struct {
	client *client
	key    *signingKey

	// usersMu guards users, which SetUser and RemoveUser change while the
	// provider runs.
	usersMu sync.RWMutex
	users   []User // in configuration order, for the login page

	// skew is added to the wall clock for the expiry of auth requests,
	// codes and access tokens (nanoseconds; tests move time forward).
	skew atomic.Int64

	mu           sync.Mutex
	authRequests map[string]*authRequest
	codes        map[string]authCode // issued, not yet redeemed
	usedCodes    map[string]authCode // redeemed (or burnt); reuse revokes
	tokens       map[string]*accessToken
	refresh      map[string]*refreshToken
}

// refreshToken is one refresh token (offline_access). It is rotated: each
// use replaces it with a new one.
type refreshToken struct {
	subject, clientID string
	scopes            []string
	authTime          time.Time
	expires           time.Time
}

// refreshRequest is what a refresh token stands for, handed to the op.
type refreshRequest struct {
	subject, clientID string
	scopes            []string
	authTime          time.Time
}

var _ op.RefreshTokenRequest = (*refreshRequest)(nil)

func (r *refreshRequest) GetAMR() []string                 { return nil }
func (r *refreshRequest) GetAudience() []string            { return []string{r.clientID} }
func (r *refreshRequest) GetAuthTime() time.Time           { return r.authTime }
func (r *refreshRequest) GetClientID() string              { return r.clientID }
func (r *refreshRequest) GetScopes() []string              { return slices.Clone(r.scopes) }
func (r *refreshRequest) GetSubject() string               { return r.subject }
func (r *refreshRequest) SetCurrentScopes(scopes []string) { r.scopes = slices.Clone(scopes) }

var (
	_ op.Storage                   = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest = (*storage)(nil)
)

func newStorage(c *client, users []User, key *signingKey) *storage {
	return &storage{
		client:       c,
		users:        users,
		key:          key,
		authRequests: make(map[string]*authRequest),
		codes:        make(map[string]authCode),
		usedCodes:    make(map[string]authCode),
		tokens:       make(map[string]*accessToken),
		refresh:      make(map[string]*refreshToken),
	}
}

func randomID() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (s *storage) now() time.Time {
	return time.Now().Add(time.Duration(s.skew.Load()))
}

func (s *storage) user(username string) (User, bool) {
	s.usersMu.RLock()
	defer s.usersMu.RUnlock()
	for _, u := range s.users {
		if u.Username == username {
			u.Groups = slices.Clone(u.Groups)
			return u, true
		}
	}
	return User{}, false
}

func (s *storage) userList() []User {
	s.usersMu.RLock()
	defer s.usersMu.RUnlock()
	return slices.Clone(s.users)
}

// SetUser adds the user, or replaces the one with the same Username (its
// groups, name and e-mail address). The userinfo endpoint answers with the
// new values at once; tokens already issued are not changed.
func (s *server) SetUser(u User) error {
	us, err := validateUsers([]User{u})
	if err != nil {
		return err
	}
	st := s.storage
	st.usersMu.Lock()
	defer st.usersMu.Unlock()
	for i := range st.users {
		if st.users[i].Username == u.Username {
			st.users[i] = us[0]
			return nil
		}
	}
	st.users = append(st.users, us[0])
	return nil
}

// RemoveUser deletes the user: their access tokens stop working and they
// can no longer sign in.
func (s *server) RemoveUser(username string) {
	st := s.storage
	st.usersMu.Lock()
	st.users = slices.DeleteFunc(st.users, func(u User) bool { return u.Username == username })
	st.usersMu.Unlock()
	_ = st.TerminateSession(context.Background(), username, "")
}

// purgeLocked drops expired state. Called with s.mu held on every write, so
// the maps stay small without a background goroutine.
func (s *storage) purgeLocked(now time.Time) {
	for id, a := range s.authRequests {
		if a.expired(now) {
			delete(s.authRequests, id)
		}
	}
	for c, e := range s.codes {
		if now.After(e.expires) {
			delete(s.codes, c)
		}
	}
	for c, e := range s.usedCodes {
		// Remember redeemed codes as long as their auth request could have
		// lived, so a replay is recognised (and revokes) rather than merely
		// "unknown".
		if now.After(e.expires.Add(authRequestTTL)) {
			delete(s.usedCodes, c)
		}
	}
	for id, t := range s.tokens {
		if now.After(t.expires) {
			delete(s.tokens, id)
		}
	}
	for id, t := range s.refresh {
		if now.After(t.expires) {
			delete(s.refresh, id)
		}
	}
}

// ---- login page helpers ----------------------------------------------------

// pendingAuthRequest returns a copy of a live auth request that still waits
// for a user.
func (s *storage) pendingAuthRequest(id string) (authRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authRequests[id]
	if !ok || a.expired(s.now()) {
		return authRequest{}, errUnknownAuthRequest
	}
	if a.done {
		return authRequest{}, errAuthRequestDone
	}
	return a.snapshot(), nil
}

// completeAuthRequest records the chosen user on a pending auth request.
func (s *storage) completeAuthRequest(id, username string) error {
	u, ok := s.user(username)
	if !ok {
		return errUnknownUser
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	a, ok := s.authRequests[id]
	if !ok || a.expired(now) {
		return errUnknownAuthRequest
	}
	if a.done {
		return errAuthRequestDone
	}
	a.done = true
	a.subject = u.Username
	a.authTime = now.UTC().Truncate(time.Second)
	return nil
}

// ---- op.AuthStorage ----------------------------------------------------------

func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	a := &authRequest{
		id:           id,
		created:      s.now(),
		clientID:     req.ClientID,
		redirectURI:  req.RedirectURI,
		state:        req.State,
		nonce:        req.Nonce,
		scopes:       slices.Clone([]string(req.Scopes)),
		responseType: req.ResponseType,
		responseMode: req.ResponseMode,
	}
	if req.CodeChallenge != "" {
		method := req.CodeChallengeMethod
		if method == "" {
			method = oidc.CodeChallengeMethodPlain
		}
		a.codeChallenge = &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: method}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked(a.created)
	s.authRequests[id] = a
	return a.snapshot(), nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authRequests[id]
	if !ok || a.expired(s.now()) {
		return nil, errUnknownAuthRequest
	}
	return a.snapshot(), nil
}

// AuthRequestByCode redeems a code: a code is single use, even when the
// token request then fails (e.g. a wrong PKCE verifier). Presenting a code a
// second time revokes the access tokens issued for it (RFC 6749, 4.1.2).
func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if used, ok := s.usedCodes[code]; ok {
		for id, t := range s.tokens {
			if t.authRequestID == used.authRequestID {
				delete(s.tokens, id)
			}
		}
		delete(s.authRequests, used.authRequestID)
		return nil, errors.New("authorization code already used")
	}
	c, ok := s.codes[code]
	if !ok {
		return nil, errors.New("unknown authorization code")
	}
	delete(s.codes, code)
	s.usedCodes[code] = c
	if now.After(c.expires) {
		return nil, errors.New("authorization code expired")
	}
	a, ok := s.authRequests[c.authRequestID]
	if !ok || a.expired(now) || !a.done {
		return nil, errors.New("authorization code has no live auth request")
	}
	return a.snapshot(), nil
}

// SaveAuthCode is called by the op's callback endpoint. Exactly one code is
// issued per auth request, so replaying the callback yields nothing.
func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.purgeLocked(now)
	a, ok := s.authRequests[id]
	if !ok || a.expired(now) {
		return errUnknownAuthRequest
	}
	if !a.done {
		return errors.New("auth request not completed")
	}
	if a.code != "" {
		return oidc.ErrInvalidRequest().WithDescription("a code was already issued for this request")
	}
	a.code = code
	s.codes[code] = authCode{authRequestID: id, expires: now.Add(authCodeTTL)}
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.authRequests, id)
	for c, e := range s.codes {
		if e.authRequestID == id {
			delete(s.codes, c)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	t, err := s.newAccessToken(req)
	if err != nil {
		return "", time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked(s.now())
	s.tokens[t.id] = t
	return t.id, t.expires, nil
}

func (s *storage) newAccessToken(req op.TokenRequest) (*accessToken, error) {
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	t := &accessToken{
		id:      id,
		subject: req.GetSubject(),
		scopes:  slices.Clone(req.GetScopes()),
		expires: s.now().Add(accessTokenTTL).UTC(),
	}
	switch r := req.(type) {
	case op.AuthRequest:
		t.clientID = r.GetClientID()
		t.authRequestID = r.GetID()
	case *refreshRequest:
		t.clientID = r.clientID
	default:
		return nil, oidc.ErrUnsupportedGrantType().WithDescription("only the authorization_code and refresh_token grants are supported")
	}
	return t, nil
}

// CreateAccessAndRefreshTokens issues an access token and a refresh token:
// for a code whose request had the offline_access scope, and for each use
// of a refresh token, which is then spent (rotation).
func (s *storage) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	t, err := s.newAccessToken(req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	rt, err := randomID()
	if err != nil {
		return "", "", time.Time{}, err
	}
	r := &refreshToken{subject: t.subject, clientID: t.clientID, scopes: slices.Clone(t.scopes), expires: s.now().Add(refreshTokenTTL)}
	switch q := req.(type) {
	case op.AuthRequest:
		r.authTime = q.GetAuthTime()
	case *refreshRequest:
		r.authTime = q.authTime
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked(s.now())
	if current != "" {
		old, ok := s.refresh[current]
		if !ok || old.subject != t.subject {
			return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("refresh token already used or unknown")
		}
		delete(s.refresh, current)
		r.expires = old.expires // rotation does not extend the login
	}
	s.tokens[t.id] = t
	s.refresh[rt] = r
	return t.id, rt, t.expires, nil
}

// TokenRequestByRefreshToken accepts a live refresh token of a user who
// still exists; anything else is invalid_grant.
func (s *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	r, ok := s.refresh[token]
	var rr *refreshRequest
	if ok && s.now().Before(r.expires) {
		rr = &refreshRequest{subject: r.subject, clientID: r.clientID, scopes: slices.Clone(r.scopes), authTime: r.authTime}
	}
	s.mu.Unlock()
	if rr == nil {
		return nil, errors.New("unknown or expired refresh token")
	}
	if _, ok := s.user(rr.subject); !ok {
		return nil, errors.New("the user no longer exists")
	}
	return rr, nil
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, clientID, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refresh[token]
	if !ok || r.clientID != clientID {
		return "", "", op.ErrInvalidRefreshToken
	}
	return r.subject, token, nil
}

func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.tokens {
		if t.subject == userID && (clientID == "" || t.clientID == clientID) {
			delete(s.tokens, id)
		}
	}
	for id, t := range s.refresh {
		if t.subject == userID && (clientID == "" || t.clientID == clientID) {
			delete(s.refresh, id)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, tokenOrTokenID, userID, clientID string) *oidc.Error {
	if userID == "" {
		// Not one of our tokens. RFC 7009: revoking an invalid token is
		// not an error.
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.refresh[tokenOrTokenID]; ok {
		if r.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("token was not issued to this client")
		}
		delete(s.refresh, tokenOrTokenID)
		return nil
	}
	t, ok := s.tokens[tokenOrTokenID]
	if !ok {
		return nil // RFC 7009: an unknown token is not an error
	}
	if t.clientID != clientID {
		return oidc.ErrInvalidClient().WithDescription("token was not issued to this client")
	}
	delete(s.tokens, tokenOrTokenID)
	return nil
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return s.key, nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{s.key.SignatureAlgorithm()}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.key}}, nil
}

// ---- op.OPStorage ------------------------------------------------------------

func (s *storage) GetClientByClientID(_ context.Context, clientID string) (op.Client, error) {
	if clientID != s.client.id {
		return nil, fmt.Errorf("unknown client %q", clientID)
	}
	return s.client, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, clientID, clientSecret string) error {
	idOK := subtle.ConstantTimeCompare([]byte(clientID), []byte(s.client.id)) == 1
	secretOK := subtle.ConstantTimeCompare([]byte(clientSecret), []byte(s.client.secret)) == 1
	if !idOK || !secretOK {
		return errors.New("invalid client credentials")
	}
	return nil
}

// SetUserinfoFromScopes is deprecated in the op; SetUserinfoFromRequest does
// the work for ID tokens.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest fills the ID token's claims.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	return s.setUserinfo(info, req.GetSubject(), scopes)
}

// SetUserinfoFromToken answers the userinfo endpoint.
func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	var scopes []string
	if ok {
		scopes = slices.Clone(t.scopes)
		ok = t.subject == subject && s.now().Before(t.expires)
	}
	s.mu.Unlock()
	if !ok {
		return errors.New("access token invalid or expired")
	}
	return s.setUserinfo(info, subject, scopes)
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	var tc accessToken
	if ok {
		tc = *t
		tc.scopes = slices.Clone(t.scopes)
	}
	s.mu.Unlock()
	if !ok || tc.subject != subject || !s.now().Before(tc.expires) {
		return errors.New("access token invalid or expired")
	}
	if tc.clientID != clientID {
		return errors.New("token was not issued to this client")
	}
	info := new(oidc.UserInfo)
	if err := s.setUserinfo(info, subject, tc.scopes); err != nil {
		return err
	}
	resp.SetUserInfo(info)
	resp.Scope = tc.scopes
	resp.ClientID = tc.clientID
	resp.Expiration = oidc.FromTime(tc.expires)
	return nil
}

// setUserinfo releases the claims of the requested scopes:
// openid: sub; profile: name, preferred_username; email: email,
// email_verified; groups: groups (always an array, possibly empty).
func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	u, ok := s.user(subject)
	if !ok {
		return fmt.Errorf("unknown user %q", subject)
	}
	info.Subject = u.Username
	for _, scope := range scopes {
		switch scope {
		case oidc.ScopeProfile:
			info.Name = u.Name
			info.PreferredUsername = u.Username
		case oidc.ScopeEmail:
			info.Email = u.Email
			info.EmailVerified = true
		case ScopeGroups:
			info.AppendClaims(ClaimGroups, slices.Clone(u.Groups))
		}
	}
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil // only used for JWT access tokens; ours are opaque
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile client authentication is not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile grant is not supported")
}

func (s *storage) Health(context.Context) error { return nil }

// ---- keys --------------------------------------------------------------------

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func newSigningKey(k *rsa.PrivateKey) (*signingKey, error) {
	// A fresh key id per process, so a client that cached the previous
	// process's JWKS re-fetches it.
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	return &signingKey{id: id[:16], key: k}, nil
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) ID() string                         { return k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.signingKey.key.PublicKey }
