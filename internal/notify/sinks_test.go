package notify_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/hyperpod-governance/portal/internal/notify"
)

// A real SMTP server on loopback (github.com/emersion/go-smtp, test only):
// STARTTLS with a certificate made here, AUTH PLAIN (or LOGIN only), and
// every message it accepted.

type mail struct {
	From string
	To   []string
	Data string
	TLS  bool
	User string
}

type smtpSink struct {
	addr     string
	roots    *x509.CertPool
	user     string
	pass     string
	onlyAuth string // "LOGIN": offer only LOGIN

	mu   sync.Mutex
	got  []mail
	down bool // answer 451 to every message
}

func (s *smtpSink) mails() []mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]mail(nil), s.got...)
}

func (s *smtpSink) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smtp test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func startSMTP(t *testing.T, onlyAuth string) *smtpSink {
	t.Helper()
	cert, pool := selfSigned(t)
	sink := &smtpSink{roots: pool, user: "portal", pass: "s3cret-smtp-password", onlyAuth: onlyAuth}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{sink: sink, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.AllowInsecureAuth = false // AUTH only after STARTTLS
	srv.ReadTimeout, srv.WriteTimeout = time.Minute, time.Minute
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sink
}

func (s *smtpSink) mailer() *notify.Mailer {
	return &notify.Mailer{Addr: s.addr, From: "portal@example.test", Username: s.user, Password: s.pass,
		TLSConfig: &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}}
}

type smtpSession struct {
	sink *smtpSink
	conn *smtp.Conn
	user string
	cur  mail
}

func (s *smtpSession) AuthMechanisms() []string {
	if s.sink.onlyAuth == sasl.Login {
		return []string{sasl.Login}
	}
	return []string{sasl.Plain}
}

func (s *smtpSession) Auth(mech string) (sasl.Server, error) {
	check := func(user, pass string) error {
		if user != s.sink.user || pass != s.sink.pass {
			return errors.New("invalid credentials")
		}
		s.user = user
		return nil
	}
	if mech == sasl.Login {
		return &loginServer{check: check}, nil
	}
	return sasl.NewPlainServer(func(_, user, pass string) error { return check(user, pass) }), nil
}

// loginServer is the server side of AUTH LOGIN (go-sasl has only the
// client): ask for the username, then the password.
type loginServer struct {
	check func(user, pass string) error
	step  int
	user  string
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step = 1
		if len(resp) > 0 { // an initial response is the username
			l.user, l.step = string(resp), 2
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.user, l.step = string(resp), 2
		return []byte("Password:"), false, nil
	default:
		return nil, true, l.check(l.user, string(resp))
	}
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.user == "" {
		return smtp.ErrAuthRequired
	}
	_, tlsOn := s.conn.TLSConnectionState()
	s.cur = mail{From: from, TLS: tlsOn, User: s.user}
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.To = append(s.cur.To, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	if s.sink.down {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	s.cur.Data = string(b)
	s.sink.got = append(s.sink.got, s.cur)
	return nil
}

func (s *smtpSession) Reset()        { s.cur = mail{} }
func (s *smtpSession) Logout() error { return nil }

// A webhook sink on loopback: it verifies every request's signature with
// its own copy of the secret and keeps what passed.

type hook struct {
	Body     string
	Delivery string
	Event    string
}

type hookSink struct {
	srv    *httptest.Server
	secret []byte
	now    func() time.Time

	mu       sync.Mutex
	got      []hook
	bad      int // requests whose signature did not verify
	status   int // answer (0: 200)
	block    chan struct{}
	entered  chan struct{}
	requests int
}

func startHook(t *testing.T, secret []byte, now func() time.Time) *hookSink {
	t.Helper()
	h := &hookSink{secret: secret, now: now}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.requests++
		block, entered, status := h.block, h.entered, h.status
		h.mu.Unlock()
		if block != nil {
			entered <- struct{}{}
			<-block
		}
		if status != 0 && status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		err := notify.Verify(h.secret, r.Header.Get(notify.HeaderTimestamp), r.Header.Get(notify.HeaderSignature), body, h.now(), 5*time.Minute)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil || r.Header.Get("Content-Type") != "application/json" {
			h.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.got = append(h.got, hook{Body: string(body), Delivery: r.Header.Get(notify.HeaderDelivery), Event: r.Header.Get(notify.HeaderEvent)})
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookSink) hooks() []hook {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hook(nil), h.got...)
}

func (h *hookSink) setStatus(code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = code
}

func (h *hookSink) badCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bad
}
