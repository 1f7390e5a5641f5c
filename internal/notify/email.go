package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"slices"
	"strings"
	"time"
)

// Mailer sends notices over SMTP: STARTTLS (required unless
// InsecurePlaintext, which cmd/portal allows only towards a loopback
// address), then AUTH PLAIN or LOGIN when a username is set, then one
// message to every recipient of the notice.
type Mailer struct {
	Addr     string // host:port of the submission server, e.g. smtp.example.com:587
	From     string // envelope and header sender
	Username string // empty: no AUTH
	Password string // never logged, never in an error
	// InsecurePlaintext sends without STARTTLS (a loopback test server).
	InsecurePlaintext bool
	// TLSConfig verifies the server (nil: the system's roots, the host of
	// Addr as the name).
	TLSConfig *tls.Config
	// Hello is the name given in EHLO (default localhost).
	Hello string
	// Timeout bounds one whole send (default 30s).
	Timeout time.Duration
}

// Send delivers m to m.To in one SMTP transaction.
func (ml *Mailer) Send(ctx context.Context, m Message) error {
	if len(m.To) == 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(ml.Addr)
	if err != nil {
		return fmt.Errorf("smtp: address %q: %w", ml.Addr, err)
	}
	timeout := ml.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	dialer := net.Dialer{Deadline: deadline}
	conn, err := dialer.DialContext(ctx, "tcp", ml.Addr)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	// A cancelled context ends a send that is waiting on the server.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("smtp: greeting: %w", err)
	}
	defer c.Close()
	if err := c.Hello(cmpOr(ml.Hello, "localhost")); err != nil {
		return fmt.Errorf("smtp: EHLO: %w", err)
	}
	if !ml.InsecurePlaintext {
		// RFC 3207: the client issues STARTTLS only when the server
		// lists it in its EHLO answer, and then says EHLO again (net/smtp
		// does).
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errors.New("smtp: the server does not offer STARTTLS, and it is required")
		}
		cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		if ml.TLSConfig != nil {
			cfg = ml.TLSConfig.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = host
			}
		}
		if err := c.StartTLS(cfg); err != nil {
			return fmt.Errorf("smtp: STARTTLS: %w", err)
		}
	}
	if ml.Username != "" {
		ok, mechs := c.Extension("AUTH")
		if !ok {
			return errors.New("smtp: a username is configured but the server offers no AUTH")
		}
		var a smtp.Auth
		switch list := strings.Fields(strings.ToUpper(mechs)); {
		case slices.Contains(list, "PLAIN"):
			// net/smtp's PLAIN refuses to send the password unless
			// the connection is TLS or to localhost.
			a = smtp.PlainAuth("", ml.Username, ml.Password, host)
		case slices.Contains(list, "LOGIN"):
			a = &loginAuth{user: ml.Username, pass: ml.Password, host: host}
		default:
			return fmt.Errorf("smtp: the server offers AUTH %s; the portal speaks PLAIN and LOGIN", mechs)
		}
		if err := c.Auth(a); err != nil {
			return fmt.Errorf("smtp: AUTH: %w", err)
		}
	}
	if err := c.Mail(ml.From); err != nil {
		return fmt.Errorf("smtp: MAIL FROM: %w", err)
	}
	for _, to := range m.To {
		if err := c.Rcpt(to); err != nil {
			return fmt.Errorf("smtp: RCPT TO %s: %w", to, err)
		}
	}
	wc, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp: DATA: %w", err)
	}
	if _, err := wc.Write(ml.compose(m, time.Now())); err != nil {
		return fmt.Errorf("smtp: DATA: %w", err)
	}
	if err := wc.Close(); err != nil {
		return fmt.Errorf("smtp: DATA: %w", err)
	}
	return c.Quit()
}

// compose builds the message (RFC 5322): the subject on one header line,
// encoded (RFC 2047) when it is not plain ASCII, so no text from a notice
// (an admin's reason, say) can add a header; the body quoted-printable.
func (ml *Mailer) compose(m Message, now time.Time) []byte {
	subject := oneLine(m.Subject)
	if len(subject) > 200 {
		subject = subject[:200] + "…"
	}
	domain := "portal.invalid"
	if _, d, ok := strings.Cut(ml.From, "@"); ok && d != "" {
		domain = strings.Trim(d, "<> ")
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	var b bytes.Buffer
	header := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	header("From", ml.From)
	header("To", strings.Join(m.To, ", "))
	header("Subject", mime.QEncoding.Encode("utf-8", "[HyperPod portal] "+subject))
	header("Date", now.Format(time.RFC1123Z))
	// The outbox row names the message: a receiver can drop a duplicate
	// sent again after a crash.
	header("Message-ID", fmt.Sprintf("<outbox-%d.%s@%s>", m.OutboxID, hex.EncodeToString(nonce[:]), domain))
	header("X-Portal-Outbox-ID", fmt.Sprint(m.OutboxID))
	header("X-Portal-Kind", oneLine(m.Kind))
	header("MIME-Version", "1.0")
	header("Content-Type", `text/plain; charset="utf-8"`)
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	body := m.Subject + "\n"
	if m.Body != "" {
		body += "\n" + strings.TrimRight(m.Body, "\n") + "\n"
	}
	if m.Link != "" {
		body += "\nConnection: " + m.Link + "\n"
	}
	if m.Inbox != "" {
		body += "Your notifications: " + m.Inbox + "\n"
	}
	body += "\nYou receive this because of your role or team in the HyperPod governance portal.\n"
	_, _ = qp.Write([]byte(strings.ReplaceAll(body, "\n", "\r\n")))
	_ = qp.Close()
	return b.Bytes()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// loginAuth is the LOGIN mechanism (draft-murchison-sasl-login): the
// server asks "Username:" then "Password:". Like net/smtp's PLAIN, it sends
// the password only over TLS or to localhost.
type loginAuth struct{ user, pass, host string }

func (a *loginAuth) Start(server *smtp.ServerInfo) (string, []byte, error) {
	if !server.TLS && !isLocalhost(server.Name) {
		return "", nil, errors.New("unencrypted connection")
	}
	if server.Name != a.host {
		return "", nil, errors.New("wrong host name")
	}
	return "LOGIN", nil, nil
}

func (a *loginAuth) Next(fromServer []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	switch strings.ToLower(strings.TrimSpace(string(fromServer))) {
	case "username:":
		return []byte(a.user), nil
	case "password:":
		return []byte(a.pass), nil
	}
	return nil, errors.New("unexpected LOGIN challenge")
}

func isLocalhost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
