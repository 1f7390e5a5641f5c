package notify_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"mime/quotedprintable"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/notify"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// clock is a test clock the worker and the sinks share.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	t     *testing.T
	path  string
	db    *store.DB
	clock *clock
	users map[string]store.User
}

// newFixture opens a real database with the dev mapping's users signed in:
// two admins, team red's owner and member, team blue's owner, a reviewer.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "portal.db"), clock: &clock{t: t0}, users: map[string]store.User{}}
	f.open()
	// In this order, so that user ids (the order recipients are listed
	// in) are the same on every run.
	for _, nu := range []struct {
		name   string
		groups []string
	}{
		{"admin", []string{"platform-admins"}}, {"admin2", []string{"platform-admins", "team-blue-members"}},
		{"owner.red", []string{"team-red-owners"}}, {"member.red", []string{"team-red-members"}}, {"owner.blue", []string{"team-blue-owners"}},
		{"reviewer", []string{"governance-reviewers"}},
	} {
		name := nu.name
		u, err := f.db.RecordLogin(t.Context(), "https://idp.test", name, name+"@example.test", name, nu.groups, t0)
		if err != nil {
			t.Fatal(err)
		}
		f.users[name] = u
	}
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	db, err := store.Open(f.t.Context(), f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := db.Migrate(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	f.db = db
	f.t.Cleanup(func() { db.Close() })
}

func (f *fixture) actor(name string) workflow.Actor {
	u := f.users[name]
	return workflow.Actor{ID: u.ID, Email: u.Email}
}

// submit creates team red's request as its owner and submits it: the
// outbox gets connection.submitted for the admins.
func (f *fixture) submit() store.Connection {
	f.t.Helper()
	ctx := f.t.Context()
	c, err := f.db.CreateConnection(ctx, workflow.ExampleContract(), f.actor("owner.red"), f.clock.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	if c, err = f.db.Transition(ctx, c.ID, workflow.EventSubmit, f.actor("owner.red"), "", store.Expect{}, f.clock.Now()); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// sendBack is an admin's change request: the outbox gets
// connection.request_changes for the team's owners.
func (f *fixture) sendBack(id int64, reason string) {
	f.t.Helper()
	if _, err := f.db.Transition(f.t.Context(), id, workflow.EventRequestChanges, f.actor("admin"), reason, store.Expect{}, f.clock.Now()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) worker(email, webhook notify.Sender) *notify.Worker {
	return &notify.Worker{DB: f.db, Resolve: auth.DevMapping().Resolve, Email: email, Webhook: webhook,
		BaseURL: "https://portal.example.test", Now: f.clock.Now}
}

func (f *fixture) run(w *notify.Worker) {
	f.t.Helper()
	if err := w.RunOnce(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) unread(name string) int {
	f.t.Helper()
	n, err := f.db.UnreadNotifications(f.t.Context(), f.users[name].ID, workflow.NoticeScope{AllTeams: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) deliveries(outbox int64) map[store.Channel]store.Delivery {
	f.t.Helper()
	ds, err := f.db.Deliveries(f.t.Context(), outbox)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[store.Channel]store.Delivery{}
	for _, d := range ds {
		out[d.Channel] = d
	}
	return out
}

func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		attempts int
		want     time.Duration
	}{
		{1, 30 * time.Second}, {2, time.Minute}, {3, 2 * time.Minute}, {4, 4 * time.Minute},
		{7, 32 * time.Minute}, {8, time.Hour}, {9, time.Hour}, {1000, time.Hour},
	} {
		if got := notify.Backoff(tt.attempts); got != tt.want {
			t.Errorf("Backoff(%d) = %s, want %s", tt.attempts, got, tt.want)
		}
	}
}

func TestRecipientsResolvedFromGroups(t *testing.T) {
	users := []store.Recipient{
		{ID: 1, Email: "admin@x", Groups: []string{"platform-admins"}},
		{ID: 2, Email: "owner.red@x", Groups: []string{"team-red-owners"}},
		{ID: 3, Email: "member.red@x", Groups: []string{"team-red-members"}},
		{ID: 4, Email: "owner.blue@x", Groups: []string{"team-blue-owners"}},
		{ID: 5, Email: "reviewer@x", Groups: []string{"governance-reviewers"}},
		{ID: 6, Email: "both@x", Groups: []string{"team-red-members", "team-red-owners", "platform-admins"}},
		{ID: 7, Email: "gone@x", Groups: []string{}},
	}
	resolve := auth.DevMapping().Resolve
	for _, tt := range []struct {
		a    workflow.Audience
		team string
		want []int64
	}{
		{workflow.ToAdmins, "red", []int64{1, 6}},
		{workflow.ToTeam, "red", []int64{2, 6}},
		{workflow.ToTeam, "blue", []int64{4}},
		{workflow.ToTeam, "", nil},
		{workflow.ToTeam, "green", nil},
		{workflow.ToReviewers, "red", []int64{5}},
		{"somebody", "red", nil},
		{workflow.ToPerson("Member.Red@x"), "red", []int64{3}},
		{workflow.ToPerson("gone@x"), "", []int64{7}},
		{workflow.ToPerson("nobody@x"), "red", nil},
		{"person:", "red", nil},
	} {
		var got []int64
		for _, u := range notify.Recipients(users, tt.a, tt.team, resolve) {
			got = append(got, u.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Recipients(%s, %q) = %v, want %v", tt.a, tt.team, got, tt.want)
		}
	}
}

// TestDeliversOnEveryChannel: a submitted request reaches the admins by
// email (a real SMTP server, STARTTLS and AUTH), by the signed webhook and
// in the app; the change request then reaches team red's owner, and nobody
// else.
func TestDeliversOnEveryChannel(t *testing.T) {
	f := newFixture(t)
	mailSink := startSMTP(t, "")
	secret := []byte("webhook-secret")
	hooks := startHook(t, secret, f.clock.Now)
	w := f.worker(mailSink.mailer(), &notify.Webhook{URL: hooks.srv.URL + "/hooks/T000/B000/XXXX", Secret: secret, Now: f.clock.Now})

	c := f.submit()
	f.run(w)
	mails := mailSink.mails()
	if len(mails) != 1 {
		t.Fatalf("mails = %d, want 1: %+v", len(mails), mails)
	}
	m := mails[0]
	if got := slices.Sorted(slices.Values(m.To)); !slices.Equal(got, []string{"admin2@example.test", "admin@example.test"}) {
		t.Errorf("mail to %v, want both admins", got)
	}
	if !m.TLS || m.User != "portal" || m.From != "portal@example.test" {
		t.Errorf("mail TLS %v user %q from %q: want STARTTLS, AUTH as portal", m.TLS, m.User, m.From)
	}
	if !strings.Contains(m.Data, "Subject: [HyperPod portal] Connection request #1 of team red (version 1) waits for approval\r\n") ||
		!strings.Contains(m.Data, "https://portal.example.test/connections/1") {
		t.Errorf("mail:\n%s", m.Data)
	}
	hs := hooks.hooks()
	if len(hs) != 1 || hooks.badCount() != 0 {
		t.Fatalf("webhooks = %+v, %d bad", hs, hooks.badCount())
	}
	if hs[0].Event != "connection.submitted" || hs[0].Delivery != "1" ||
		hs[0].Body != `{"text":"Connection request #1 of team red (version 1) waits for approval \u003chttps://portal.example.test/connections/1|open in the portal\u003e"}` {
		t.Errorf("webhook = %+v", hs[0])
	}
	for name, want := range map[string]int{"admin": 1, "admin2": 1, "owner.red": 0, "owner.blue": 0, "reviewer": 0, "member.red": 0} {
		if got := f.unread(name); got != want {
			t.Errorf("%s unread = %d, want %d", name, got, want)
		}
	}
	for ch, d := range f.deliveries(1) {
		if d.Delivered.IsZero() || d.Attempts != 1 || d.LastError != "" {
			t.Errorf("%s delivery = %+v", ch, d)
		}
		if ch != store.ChannelWebhook && d.Recipients != "admin@example.test, admin2@example.test" {
			t.Errorf("%s recipients recorded %q", ch, d.Recipients)
		}
	}

	f.sendBack(c.ID, "name a cost centre")
	f.run(w)
	if mails = mailSink.mails(); len(mails) != 2 || !slices.Equal(mails[1].To, []string{"owner.red@example.test"}) ||
		!strings.Contains(mails[1].Data, "was sent back for changes: name a cost centre") {
		t.Errorf("second mail = %+v", mails[len(mails)-1])
	}
	if f.unread("owner.red") != 1 || f.unread("owner.blue") != 0 || f.unread("member.red") != 0 || f.unread("admin") != 1 {
		t.Errorf("unread after the change request: red owner %d, blue owner %d, red member %d, admin %d",
			f.unread("owner.red"), f.unread("owner.blue"), f.unread("member.red"), f.unread("admin"))
	}
	// Running again sends nothing twice.
	f.run(w)
	if len(mailSink.mails()) != 2 || len(hooks.hooks()) != 2 {
		t.Errorf("a second run sent again: %d mails, %d webhooks", len(mailSink.mails()), len(hooks.hooks()))
	}
}

func TestEmailAuthLogin(t *testing.T) {
	f := newFixture(t)
	sink := startSMTP(t, "LOGIN")
	w := f.worker(sink.mailer(), nil)
	f.submit()
	f.run(w)
	if m := sink.mails(); len(m) != 1 || m[0].User != "portal" || !m[0].TLS {
		t.Fatalf("mails over AUTH LOGIN = %+v", m)
	}
}

// TestEmailRefusesWithoutSTARTTLS: a server that offers no STARTTLS gets
// nothing (the password is never sent in clear), and the failure names no
// secret; a wrong password fails without echoing it either.
func TestEmailRefusesWithoutTLSAndKeepsThePasswordOut(t *testing.T) {
	f := newFixture(t)
	sink := startSMTP(t, "")
	plain := startPlainSMTP(t)
	ml := sink.mailer()
	ml.Addr = plain
	w := f.worker(ml, nil)
	f.submit()
	f.run(w)
	d := f.deliveries(1)[store.ChannelEmail]
	if !d.Delivered.IsZero() || !strings.Contains(d.LastError, "does not offer STARTTLS") {
		t.Errorf("email to a server without STARTTLS = %+v", d)
	}
	wrong := sink.mailer()
	wrong.Password = "not-the-password-42"
	w = f.worker(wrong, nil)
	f.clock.Add(time.Hour)
	f.run(w)
	d = f.deliveries(1)[store.ChannelEmail]
	if !d.Delivered.IsZero() || !strings.Contains(d.LastError, "AUTH") || strings.Contains(d.LastError, "not-the-password-42") {
		t.Errorf("email with a wrong password = %+v", d)
	}
	if len(sink.mails()) != 0 {
		t.Errorf("mails = %+v", sink.mails())
	}
}

// startPlainSMTP is a server that offers no STARTTLS.
func startPlainSMTP(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 512)
				_, _ = c.Write([]byte("220 plain ESMTP\r\n"))
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					cmd := strings.ToUpper(string(buf[:n]))
					switch {
					case strings.HasPrefix(cmd, "EHLO"):
						_, _ = c.Write([]byte("250-plain\r\n250 AUTH PLAIN\r\n"))
					case strings.HasPrefix(cmd, "QUIT"):
						_, _ = c.Write([]byte("221 bye\r\n"))
						return
					default:
						_, _ = c.Write([]byte("500 no\r\n"))
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// TestNoticeTextCannotAddHeaders: an admin's reason ends up in the
// subject; a line break in it cannot add a header (a Bcc, say).
func TestNoticeTextCannotAddHeaders(t *testing.T) {
	f := newFixture(t)
	sink := startSMTP(t, "")
	w := f.worker(sink.mailer(), nil)
	c := f.submit()
	f.sendBack(c.ID, "fix it\r\nBcc: evil@example.test\r\n\r\nbody")
	f.run(w)
	ms := sink.mails()
	if len(ms) != 2 {
		t.Fatalf("mails = %d", len(ms))
	}
	head, _, _ := strings.Cut(ms[1].Data, "\r\n\r\n")
	if strings.Contains(strings.ToLower(head), "\nbcc:") || slices.Contains(ms[1].To, "evil@example.test") {
		t.Errorf("the reason added a header:\n%s", head)
	}
}

func TestWebhookSignatureVerifies(t *testing.T) {
	secret := []byte("right")
	body := []byte(`{"text":"hello"}`)
	now := t0
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := notify.Sign(secret, ts, body)
	if err := notify.Verify(secret, ts, sig, body, now, 5*time.Minute); err != nil {
		t.Fatalf("the right secret: %v", err)
	}
	for name, bad := range map[string]func() error{
		"wrong secret": func() error { return notify.Verify([]byte("wrong"), ts, sig, body, now, 5*time.Minute) },
		"changed body": func() error { return notify.Verify(secret, ts, sig, []byte(`{"text":"hellO"}`), now, 5*time.Minute) },
		"other time": func() error {
			return notify.Verify(secret, strconv.FormatInt(now.Unix()+1, 10), sig, body, now, 5*time.Minute)
		},
		"replayed later": func() error { return notify.Verify(secret, ts, sig, body, now.Add(time.Hour), 5*time.Minute) },
		"no signature":   func() error { return notify.Verify(secret, ts, "", body, now, 5*time.Minute) },
	} {
		if bad() == nil {
			t.Errorf("%s verified", name)
		}
	}
}

// TestWebhookWrongSecretIsRefused: a portal signing with another secret
// than the receiver's gets refused, and the delivery is retried, not lost.
func TestWebhookWrongSecretIsRefused(t *testing.T) {
	f := newFixture(t)
	hooks := startHook(t, []byte("the receiver's"), f.clock.Now)
	w := f.worker(nil, &notify.Webhook{URL: hooks.srv.URL, Secret: []byte("another"), Now: f.clock.Now})
	f.submit()
	f.run(w)
	if hooks.badCount() != 1 || len(hooks.hooks()) != 0 {
		t.Fatalf("bad %d, accepted %d", hooks.badCount(), len(hooks.hooks()))
	}
	if d := f.deliveries(1)[store.ChannelWebhook]; !d.Delivered.IsZero() || !strings.Contains(d.LastError, "401") {
		t.Errorf("delivery = %+v", d)
	}
}

// TestDeadChannelIsRetriedWithBackoff: a webhook answering 500 is tried
// again only after its backoff (30s, then 1m, ...), email and in-app are
// delivered meanwhile, the state changes go on, and once the receiver is
// back the notice arrives exactly once. The error shown never holds the
// webhook URL (it carries a token).
func TestDeadChannelIsRetriedWithBackoff(t *testing.T) {
	f := newFixture(t)
	mailSink := startSMTP(t, "")
	secret := []byte("s")
	hooks := startHook(t, secret, f.clock.Now)
	hooks.setStatus(http.StatusInternalServerError)
	w := f.worker(mailSink.mailer(), &notify.Webhook{URL: hooks.srv.URL + "/services/T0/B0/SECRETTOKEN", Secret: secret, Now: f.clock.Now})
	c := f.submit()
	f.run(w)
	d := f.deliveries(1)
	if d[store.ChannelEmail].Delivered.IsZero() || d[store.ChannelInApp].Delivered.IsZero() {
		t.Fatalf("a dead webhook held up the other channels: %+v", d)
	}
	wh := d[store.ChannelWebhook]
	if !wh.Delivered.IsZero() || wh.Attempts != 1 || !wh.NextAttempt.Equal(t0.Add(30*time.Second)) || !strings.Contains(wh.LastError, "500") {
		t.Fatalf("webhook after one failure = %+v", wh)
	}
	if strings.Contains(wh.LastError, "SECRETTOKEN") || strings.Contains(wh.LastError, "/services/") {
		t.Errorf("the error shows the webhook URL: %q", wh.LastError)
	}
	failing, err := f.db.FailingDeliveries(t.Context(), 100)
	if err != nil || len(failing) != 1 || failing[0].Channel != store.ChannelWebhook {
		t.Errorf("failing deliveries = %+v, %v", failing, err)
	}

	// The workflow goes on: the change request commits and is delivered
	// on the other channels.
	f.sendBack(c.ID, "more detail")
	f.run(w)
	if n := f.unread("owner.red"); n != 1 {
		t.Errorf("owner's unread = %d", n)
	}
	if wh = f.deliveries(1)[store.ChannelWebhook]; wh.Attempts != 1 {
		t.Errorf("tried again before its backoff: %+v", wh)
	}
	f.clock.Add(30 * time.Second)
	f.run(w)
	if wh = f.deliveries(1)[store.ChannelWebhook]; wh.Attempts != 2 || !wh.NextAttempt.Equal(t0.Add(30*time.Second+time.Minute)) {
		t.Errorf("second failure = %+v (want next attempt 1m later)", wh)
	}
	hooks.setStatus(0)
	f.clock.Add(time.Minute)
	f.run(w)
	f.run(w)
	got := map[string]int{}
	for _, h := range hooks.hooks() {
		got[h.Delivery]++
	}
	if got["1"] != 1 || got["2"] != 1 || len(got) != 2 {
		t.Errorf("webhooks received per outbox row = %v, want each once", got)
	}
	if failing, _ := f.db.FailingDeliveries(t.Context(), 100); len(failing) != 0 {
		t.Errorf("still failing: %+v", failing)
	}
}

// TestRefusedConnectionIsRetried: nothing listens on the webhook's port.
func TestRefusedConnectionIsRetried(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	w := f.worker(nil, &notify.Webhook{URL: "http://" + addr + "/hook?token=SECRETTOKEN", Secret: []byte("s"), Now: f.clock.Now})
	f.submit()
	f.run(w)
	wh := f.deliveries(1)[store.ChannelWebhook]
	if !wh.Delivered.IsZero() || wh.LastError == "" || strings.Contains(wh.LastError, "SECRETTOKEN") {
		t.Errorf("webhook to a closed port = %+v", wh)
	}
	if f.unread("admin") != 1 {
		t.Errorf("in-app held up by a dead webhook")
	}
}

// TestHungChannelDoesNotHoldUpOthers: a mail server that accepts the
// connection and never answers holds the email channel only: in-app and the
// webhook (drained after email, were the channels tried one after the
// other) are delivered meanwhile.
func TestHungChannelDoesNotHoldUpOthers(t *testing.T) {
	f := newFixture(t)
	hooks := startHook(t, []byte("s"), f.clock.Now)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // held open, never greeted
		}
	}()
	defer ln.Close()
	w := f.worker(&notify.Mailer{Addr: ln.Addr().String(), From: "portal@example.test"},
		&notify.Webhook{URL: hooks.srv.URL, Secret: []byte("s"), Now: f.clock.Now})
	f.submit()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunOnce(ctx) }()
	hung := <-accepted // the email's send is waiting for a greeting now
	for len(hooks.hooks()) == 0 || f.deliveries(1)[store.ChannelInApp].Delivered.IsZero() {
		select {
		case err := <-done:
			t.Fatalf("RunOnce returned while the mail server hangs: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !f.deliveries(1)[store.ChannelEmail].Delivered.IsZero() || f.unread("admin") != 1 {
		t.Errorf("email delivered %v, admin unread %d", f.deliveries(1)[store.ChannelEmail], f.unread("admin"))
	}
	// Stopping the process ends the hung send; the email stays to do.
	cancel()
	<-done
	hung.Close()
	if d := f.deliveries(1)[store.ChannelEmail]; !d.Delivered.IsZero() {
		t.Errorf("email = %+v", d)
	}
}

// TestNothingLostAcrossARestart: the process dies with a webhook delivery
// claimed (its lease held) and the mail server down; after a restart on the
// same database file every delivery completes, each exactly once.
func TestNothingLostAcrossARestart(t *testing.T) {
	f := newFixture(t)
	mailSink := startSMTP(t, "")
	hooks := startHook(t, []byte("s"), f.clock.Now)
	mailSink.setDown(true)
	c := f.submit()
	f.sendBack(c.ID, "again")
	w := f.worker(mailSink.mailer(), &notify.Webhook{URL: hooks.srv.URL, Secret: []byte("s"), Now: f.clock.Now})
	if _, err := f.db.DispatchOutbox(t.Context(), w.Channels(), f.clock.Now(), 100); err != nil {
		t.Fatal(err)
	}
	// In-app and email run; the webhook is claimed by a process that dies
	// before sending (its claim is never completed).
	if _, ok, err := f.db.ClaimDelivery(t.Context(), store.ChannelWebhook, f.clock.Now(), notify.DefaultLease); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	for _, ch := range []store.Channel{store.ChannelInApp, store.ChannelEmail} {
		if _, err := w.Drain(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	}
	if len(mailSink.mails()) != 0 || f.unread("admin") != 1 {
		t.Fatalf("before the restart: %d mails, admin unread %d", len(mailSink.mails()), f.unread("admin"))
	}
	// While its lease holds, nobody else sends the claimed webhook: a
	// second worker sends only the other outbox row's.
	if n, err := f.worker(nil, &notify.Webhook{URL: hooks.srv.URL, Secret: []byte("s"), Now: f.clock.Now}).Drain(t.Context(), store.ChannelWebhook); err != nil || n != 1 {
		t.Fatalf("second worker delivered %d webhooks (%v), want 1 (the unclaimed one)", n, err)
	}
	if hs := hooks.hooks(); len(hs) != 1 || hs[0].Delivery != "2" {
		t.Fatalf("webhooks while the lease holds = %+v", hs)
	}
	// The process dies.
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	// A new one starts on the same file, later: the lease and the
	// backoff have run out; the mail server is back.
	f.open()
	mailSink.setDown(false)
	f.clock.Add(notify.DefaultLease + time.Second)
	w = f.worker(mailSink.mailer(), &notify.Webhook{URL: hooks.srv.URL, Secret: []byte("s"), Now: f.clock.Now})
	f.run(w)
	f.clock.Add(time.Hour)
	f.run(w)
	perMail := map[string]int{}
	for _, m := range mailSink.mails() {
		_, rest, _ := strings.Cut(m.Data, "X-Portal-Outbox-ID: ")
		id, _, _ := strings.Cut(rest, "\r\n")
		perMail[id]++
	}
	perHook := map[string]int{}
	for _, h := range hooks.hooks() {
		perHook[h.Delivery]++
	}
	want := map[string]int{"1": 1, "2": 1}
	if !maps(perMail, want) || !maps(perHook, want) {
		t.Errorf("after the restart: mails per outbox row %v, webhooks %v; want each once", perMail, perHook)
	}
	if f.unread("admin") != 1 || f.unread("owner.red") != 1 {
		t.Errorf("in-app after the restart: admin %d, owner %d (want 1 each)", f.unread("admin"), f.unread("owner.red"))
	}
	for _, id := range []int64{1, 2} {
		for ch, d := range f.deliveries(id) {
			if d.Delivered.IsZero() {
				t.Errorf("outbox %d %s not delivered: %+v", id, ch, d)
			}
		}
	}
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestAbsentChannelsPileNothingUp: without email and webhook, only in-app
// deliveries are recorded.
func TestAbsentChannelsPileNothingUp(t *testing.T) {
	f := newFixture(t)
	f.submit()
	f.run(f.worker(nil, nil))
	d := f.deliveries(1)
	if len(d) != 1 || d[store.ChannelInApp].Delivered.IsZero() {
		t.Errorf("deliveries without email and webhook = %+v", d)
	}
}

// TestInAppIsPerUser: each user reads and marks only their own
// notifications.
func TestInAppIsPerUser(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	f.submit()
	f.run(f.worker(nil, nil))
	admin, admin2 := f.users["admin"].ID, f.users["admin2"].ID
	ns, err := f.db.Notifications(ctx, admin, workflow.NoticeScope{AllTeams: true}, 50)
	if err != nil || len(ns) != 1 || ns[0].ConnectionID != 1 || ns[0].Read {
		t.Fatalf("admin's notifications = %+v, %v", ns, err)
	}
	other, _ := f.db.Notifications(ctx, admin2, workflow.NoticeScope{AllTeams: true}, 50)
	if len(other) != 1 || other[0].ID == ns[0].ID {
		t.Fatalf("admin2's notifications = %+v", other)
	}
	// admin2 cannot mark admin's notification.
	if err := f.db.MarkNotificationRead(ctx, admin2, workflow.NoticeScope{AllTeams: true}, ns[0].ID, f.clock.Now()); err != store.ErrNotFound {
		t.Errorf("marking another's notification = %v, want ErrNotFound", err)
	}
	if f.unread("admin") != 1 {
		t.Errorf("another user marked admin's notification read")
	}
	if err := f.db.MarkNotificationRead(ctx, admin, workflow.NoticeScope{AllTeams: true}, ns[0].ID, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if f.unread("admin") != 0 || f.unread("admin2") != 1 {
		t.Errorf("after marking: admin %d, admin2 %d", f.unread("admin"), f.unread("admin2"))
	}
	if n, err := f.db.MarkAllNotificationsRead(ctx, f.users["owner.red"].ID, workflow.NoticeScope{AllTeams: true}, f.clock.Now()); err != nil || n != 0 {
		t.Errorf("owner marks all = %d, %v", n, err)
	}
	if f.unread("admin2") != 1 {
		t.Errorf("another user's mark-all reached admin2")
	}
	if n, _ := f.db.MarkAllNotificationsRead(ctx, admin2, workflow.NoticeScope{AllTeams: true}, f.clock.Now()); n != 1 || f.unread("admin2") != 0 {
		t.Errorf("admin2 marks all = %d", n)
	}
}

// TestSignalOwnerIsTold: a signal that fires is recorded with a notice in
// the outbox for the person the contract names as its owner (here team
// red's member, who is neither an owner nor a reviewer), who gets it by
// email, in the app and through the webhook, with the response the
// contract asks of them; nobody else is mailed. Evaluating again while it
// still fires records and sends nothing more. The cluster's signal, owned
// by the platform's admins, reaches the admins.
func TestSignalOwnerIsTold(t *testing.T) {
	f := newFixture(t)
	mailSink := startSMTP(t, "")
	secret := []byte("webhook-secret")
	hooks := startHook(t, secret, f.clock.Now)
	w := f.worker(mailSink.mailer(), &notify.Webhook{URL: hooks.srv.URL + "/hooks/T000/B000/XXXX", Secret: secret, Now: f.clock.Now})
	firing := []usage.SignalStatus{{Kind: usage.SignalUtilization, Team: "red", State: usage.SignalFiring, Threshold: "fires below 40%",
		Current: "12% over 7 days", Owner: "Member.Red@example.test", Response: "Release idle GPUs within a day."}}
	for range 2 {
		if _, err := f.db.RecordFired(t.Context(), firing, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		f.run(w)
	}
	mails := mailSink.mails()
	if len(mails) != 1 || !slices.Equal(mails[0].To, []string{"member.red@example.test"}) ||
		!strings.Contains(mails[0].Data, "X-Portal-Kind: signal.fired") ||
		// The body, quoted-printable: soft line breaks joined.
		!strings.Contains(qpJoin(mails[0].Data), "Signal fired for team red: "+usage.SignalUtilization.Title()) ||
		!strings.Contains(qpJoin(mails[0].Data), "Your response, per the contract: Release idle GPUs within a day.") {
		t.Fatalf("mails = %+v, want one to the signal's owner with the response", mails)
	}
	if hs := hooks.hooks(); len(hs) != 1 || hs[0].Event != "signal.fired" || !strings.Contains(hs[0].Body, "Release idle GPUs") {
		t.Errorf("webhooks = %+v", hs)
	}
	for name, want := range map[string]int{"member.red": 1, "owner.red": 0, "reviewer": 0, "admin": 0} {
		if got := f.unread(name); got != want {
			t.Errorf("%s unread = %d, want %d", name, got, want)
		}
	}
	cluster := []usage.SignalStatus{{Kind: usage.SignalNodeHealth, State: usage.SignalFiring, Threshold: "fires on any unhealthy node",
		Current: "3600 unhealthy node-seconds", Owner: "the platform's admins", Response: "Check the nodes."}}
	if _, err := f.db.RecordFired(t.Context(), cluster, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.run(w)
	if mails = mailSink.mails(); len(mails) != 2 || !slices.Equal(slices.Sorted(slices.Values(mails[1].To)), []string{"admin2@example.test", "admin@example.test"}) {
		t.Errorf("cluster signal mailed %+v, want the admins", mails[len(mails)-1])
	}
	// A signal of team red owned by someone outside red (blue's owner, as
	// finance or another team's engineer may be): the notice is addressed
	// to them by name, so they read it in the app under the read rule
	// itself (workflow.NoticeScopeOf), not only by mail (review finding).
	outside := []usage.SignalStatus{{Kind: usage.SignalWaitTime, Team: "red", State: usage.SignalFiring, Threshold: "fires above 1h",
		Current: "3h p90", Owner: "owner.blue@example.test", Response: "Look at red's queue."}}
	if _, err := f.db.RecordFired(t.Context(), outside, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.run(w)
	blue := f.users["owner.blue"]
	scope := workflow.NoticeScopeOf(workflow.NewPrincipal(blue.ID, "owner.blue", blue.Email, blue.Name, nil, []workflow.Membership{{Team: "blue", Role: workflow.TeamOwner}}))
	if n, err := f.db.UnreadNotifications(t.Context(), blue.ID, scope); err != nil || n != 1 {
		t.Errorf("blue's owner, the owner of red's signal, can read %d notices in the app (%v), want 1", n, err)
	}
	if ns, _ := f.db.Notifications(t.Context(), blue.ID, scope, 10); len(ns) != 1 || ns[0].Kind != "signal.fired" {
		t.Errorf("blue's owner's notices = %+v, want the signal", ns)
	}
}

// qpJoin undoes quoted-printable's soft line breaks.
func qpJoin(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "=\n", "")
}

// TestNoticeBodyTravels: a notice with a body (the daily audit head, issue
// 31 item 11) carries it, line by line, in the mail after the subject and
// in the webhook's text after it (Slack's markup characters escaped); the
// in-app list shows the subject.
func TestNoticeBodyTravels(t *testing.T) {
	f := newFixture(t)
	mailSink := startSMTP(t, "")
	secret := []byte("webhook-secret")
	hooks := startHook(t, secret, f.clock.Now)
	w := f.worker(mailSink.mailer(), &notify.Webhook{URL: hooks.srv.URL, Secret: secret, Now: f.clock.Now})
	ctx := t.Context()
	key, err := signing.Generate(rand.Reader, []byte("0123456789abcdef0123456789abcdef"), f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.db.EnsureSigningKey(ctx, key, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	h := workflow.AuditHead{Day: "2026-11-02", ID: 7, Count: 7, Hash: strings.Repeat("ab", 32), At: "2026-11-02T08:00:00.000000000Z",
		Line: "day=2026-11-02 id=7", KeyID: key.KeyID, Signature: "c2ln<&>"}
	ok, err := f.db.PublishAuditHead(ctx, store.AuditHeadPublication{Day: h.Day, HeadID: h.ID, HeadCount: h.Count, HeadHash: h.Hash, HeadAt: h.At,
		KeyID: h.KeyID, Signature: h.Signature, PublishedAt: f.clock.Now()}, workflow.AuditHeadNotice(h))
	if err != nil || !ok {
		t.Fatalf("PublishAuditHead = %v, %v", ok, err)
	}
	f.run(w)
	mails := mailSink.mails()
	if len(mails) != 1 {
		t.Fatalf("mails = %d", len(mails))
	}
	head, body, _ := strings.Cut(mails[0].Data, "\r\n\r\n")
	text, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	plain := head + "\r\n\r\n" + string(text)
	for _, want := range []string{"Subject: [HyperPod portal] Audit chain head for 2026-11-02", "head_id: 7\r\n", "head_hash: " + h.Hash + "\r\n", "key_id: " + key.KeyID + "\r\n",
		"portal audit verify --head " + h.Hash} {
		if !strings.Contains(plain, want) {
			t.Errorf("the mail lacks %q:\n%s", want, plain)
		}
	}
	hs := hooks.hooks()
	if len(hs) != 1 || hs[0].Event != "audit.head_published" {
		t.Fatalf("webhooks %+v", hs)
	}
	var msg struct{ Text string }
	if err := json.Unmarshal([]byte(hs[0].Body), &msg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg.Text, "\nhead_hash: "+h.Hash+"\n") || !strings.Contains(msg.Text, "c2ln&lt;&amp;&gt;") || strings.Contains(msg.Text, "<&>") {
		t.Errorf("webhook text:\n%s", msg.Text)
	}
	if f.unread("admin") != 1 || f.unread("owner.red") != 0 {
		t.Errorf("unread: admin %d, owner.red %d", f.unread("admin"), f.unread("owner.red"))
	}
}
