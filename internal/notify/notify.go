// Package notify delivers the notification outbox.
//
// Every state change writes its notices into the outbox in the transaction
// that records it (internal/store's apply). The Worker here dispatches each
// outbox row once into one delivery per configured channel (in-app always;
// email over SMTP and a signed webhook when configured), then tries each
// delivery on its own: a delivery is claimed with a lease, its recipients are
// resolved at that moment from the users' last known groups and kept only
// when their membership is confirmed (by the directory when configured,
// otherwise by groups confirmed within a session's lifetime), and it is
// recorded delivered, or failed with a next attempt after an exponential
// backoff (capped at MaxBackoff). Deliveries are rows, so nothing is lost
// across a restart; a claim whose process died is tried again when its lease
// runs out. The channels are drained side by side, so a dead or slow channel
// never holds up another, and nothing here can hold up the state change,
// which committed before.
//
// In-app notifications are written with their delivery in one transaction
// (exactly once). Email and webhook are at least once: a process that dies
// between sending and recording sends again; the email's Message-ID and the
// webhook's X-Portal-Delivery header name the outbox row, so a receiver can
// drop the duplicate.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Message is one notice as a channel sends it.
type Message struct {
	OutboxID     int64
	Kind         string
	Team         string
	ConnectionID int64
	Subject      string
	// Body is more text after the subject, line by line ("" for most).
	Body string
	// Link is the connection's page (empty without a connection or base
	// URL); Inbox the recipient's notifications page.
	Link, Inbox string
	// To are the recipients' email addresses (email only).
	To []string
}

// Sender is an external channel: email or webhook.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Resolver gives the roles and team memberships a user's groups grant (the
// portal's group mapping, auth.Mapping.Resolve).
type Resolver func(groups []string) ([]workflow.Role, []workflow.Membership)

// Backoff schedule of failed deliveries.
const (
	FirstBackoff = 30 * time.Second
	MaxBackoff   = time.Hour
	// DefaultLease is how long a claimed delivery is held: longer than
	// any send may take (the senders time out well before).
	DefaultLease = 2 * time.Minute
)

// Backoff is how long a delivery waits after its attempts-th failed
// attempt: FirstBackoff, doubling, at most MaxBackoff.
func Backoff(attempts int) time.Duration {
	d := FirstBackoff
	for i := 1; i < attempts; i++ {
		d *= 2
		if d >= MaxBackoff {
			return MaxBackoff
		}
	}
	return d
}

// Worker delivers the outbox.
type Worker struct {
	DB      *store.DB
	Resolve Resolver
	// Email and Webhook are the optional channels; nil: not configured,
	// and no delivery is recorded for them.
	Email, Webhook Sender
	// BaseURL is the portal's external URL, for links (may be empty).
	BaseURL string
	Now     func() time.Time
	Lease   time.Duration
	Logger  *slog.Logger
	// Directory, when groups come from the organisation's directory (the
	// Identity Store), is asked at delivery for the groups of every
	// recipient it knows by name: a user it no longer has, or whose groups
	// no longer qualify, receives nothing. When it cannot be asked, the
	// delivery fails and is tried again (a notice is neither lost nor sent
	// on groups nobody confirmed).
	Directory auth.GroupSource
	// MaxGroupsAge is how long after their last confirmation (sign-in,
	// session re-check, the Directory at a delivery) a user's groups make
	// them a recipient: a session's lifetime, so an owner moved out of the
	// team who never signs in again stops receiving its notices.
	// 0: DefaultMaxGroupsAge.
	MaxGroupsAge time.Duration
}

// DefaultMaxGroupsAge is the session lifetime's default (portal serve
// --session-lifetime).
const DefaultMaxGroupsAge = 12 * time.Hour

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Channels are the channels this worker delivers on.
func (w *Worker) Channels() []store.Channel {
	ch := []store.Channel{store.ChannelInApp}
	if w.Email != nil {
		ch = append(ch, store.ChannelEmail)
	}
	if w.Webhook != nil {
		ch = append(ch, store.ChannelWebhook)
	}
	return ch
}

// Run delivers every interval until ctx ends. Several processes may run it
// at once: every delivery is claimed with a lease.
func (w *Worker) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := w.RunOnce(ctx); err != nil && ctx.Err() == nil {
			w.logger().Error("notification delivery", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce dispatches the outbox, then drains every channel side by side
// until none has a due delivery left.
func (w *Worker) RunOnce(ctx context.Context) error {
	var errs []error
	for {
		n, err := w.DB.DispatchOutbox(ctx, w.Channels(), w.now(), 500)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if n < 500 {
			break
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, ch := range w.Channels() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.Drain(ctx, ch); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Drain tries every due delivery of one channel, one after the other, and
// returns how many it delivered. A failed delivery waits for its backoff;
// only an error of the database stops the drain.
func (w *Worker) Drain(ctx context.Context, ch store.Channel) (int, error) {
	lease := w.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	delivered := 0
	// The users (and their groups) are read once a drain, not once a
	// delivery; the webhook names nobody and reads none.
	var users []store.Recipient
	loaded := false
	recipients := func() ([]store.Recipient, error) {
		if loaded || ch == store.ChannelWebhook {
			return users, nil
		}
		var err error
		users, err = w.DB.Recipients(ctx)
		loaded = err == nil
		return users, err
	}
	// The directory's answer for a user is asked once a drain, not once a
	// delivery (a drain takes seconds; membership changes slower).
	asked := map[string]directoryAnswer{}
	for ctx.Err() == nil {
		dl, ok, err := w.DB.ClaimDelivery(ctx, ch, w.now(), lease)
		if err != nil {
			return delivered, err
		}
		if !ok {
			return delivered, nil
		}
		ok, err = w.deliver(ctx, dl, recipients, asked)
		switch {
		case errors.Is(err, store.ErrDeliveryLeaseLost):
			w.logger().Warn("notification delivery taken over after its lease ran out", "delivery", dl.ID, "channel", ch)
		case err != nil:
			return delivered, err
		case ok:
			delivered++
			w.logger().Info("notice delivered", "channel", ch, "kind", dl.Kind, "outbox", dl.OutboxID, "attempt", dl.Attempts)
		}
	}
	return delivered, ctx.Err()
}

// deliver makes one attempt of a claimed delivery and records its outcome;
// recipients gives the portal's users.
func (w *Worker) deliver(ctx context.Context, dl store.Delivery, recipients func() ([]store.Recipient, error), asked map[string]directoryAnswer) (bool, error) {
	users, err := recipients()
	if err != nil {
		return false, err
	}
	to := Recipients(users, workflow.Audience(dl.Audience), dl.Team, w.Resolve)
	to, err = w.confirmed(ctx, to, workflow.Audience(dl.Audience), dl.Team, asked)
	if err != nil {
		w.logger().Warn("notification delivery: recipients could not be confirmed in the directory", "delivery", dl.ID, "channel", dl.Channel, "err", err)
		return false, w.DB.FailDelivery(ctx, dl, "", "the recipients' groups could not be confirmed in the directory: "+safeError(err), w.now().Add(Backoff(dl.Attempts)))
	}
	var emails []string
	for _, u := range to {
		if u.Email != "" {
			emails = append(emails, u.Email)
		}
	}
	if dl.Audience != "" && !knownAudience(workflow.Audience(dl.Audience)) {
		w.logger().Warn("notice for an unknown audience: nobody receives it", "outbox", dl.OutboxID, "audience", dl.Audience, "kind", dl.Kind)
	}
	now := w.now()
	switch dl.Channel {
	case store.ChannelInApp:
		ids := make([]int64, len(to))
		for i, u := range to {
			ids[i] = u.ID
		}
		return true, w.DB.DeliverInApp(ctx, dl, ids, store.JoinRecipients(emails), now)
	case store.ChannelEmail, store.ChannelWebhook:
		sender := w.Email
		recorded := store.JoinRecipients(emails)
		if dl.Channel == store.ChannelWebhook {
			sender, recorded = w.Webhook, "webhook"
		}
		if sender == nil {
			// Configured when it was dispatched, not now: it waits
			// until the channel is configured again.
			return false, w.DB.FailDelivery(ctx, dl, "", "the "+string(dl.Channel)+" channel is not configured in this process", now.Add(Backoff(dl.Attempts)))
		}
		if dl.Channel == store.ChannelEmail && len(emails) == 0 {
			return true, w.DB.CompleteDelivery(ctx, dl, "", now) // nobody to mail
		}
		sendCtx, cancel := context.WithTimeout(ctx, w.sendTimeout())
		err := sender.Send(sendCtx, w.message(dl, emails))
		cancel()
		if err != nil {
			w.logger().Warn("notification delivery failed", "delivery", dl.ID, "channel", dl.Channel, "attempt", dl.Attempts, "err", err)
			return false, w.DB.FailDelivery(ctx, dl, recorded, safeError(err), w.now().Add(Backoff(dl.Attempts)))
		}
		return true, w.DB.CompleteDelivery(ctx, dl, recorded, w.now())
	}
	return false, w.DB.FailDelivery(ctx, dl, "", fmt.Sprintf("unknown channel %q", dl.Channel), now.Add(MaxBackoff))
}

// confirmed keeps the recipients whose membership is confirmed now: by the
// Directory when it is set and knows the user, otherwise, for the
// audiences that need it (workflow.Audience.NeedsFreshMembership), by
// groups confirmed within MaxGroupsAge (issue 32 item 1).
func (w *Worker) confirmed(ctx context.Context, to []store.Recipient, a workflow.Audience, team string, asked map[string]directoryAnswer) ([]store.Recipient, error) {
	now := w.now()
	maxAge := w.MaxGroupsAge
	if maxAge <= 0 {
		maxAge = DefaultMaxGroupsAge
	}
	var out []store.Recipient
	for _, u := range to {
		if w.Directory != nil && u.DirName != "" {
			ans, ok := asked[u.DirName]
			if !ok {
				ans.groups, ans.err = freshGroups(ctx, w.Directory, u.DirName)
				if ans.err == nil || errors.Is(ans.err, auth.ErrUserNotInDirectory) {
					asked[u.DirName] = ans // an outage is asked again
				}
			}
			groups, err := ans.groups, ans.err
			if errors.Is(err, auth.ErrUserNotInDirectory) {
				w.logger().Info("notice not sent: the directory no longer has the user", "user_id", u.ID)
				continue
			}
			if err != nil {
				return nil, err
			}
			if groups == nil {
				groups = []string{}
			}
			if err := w.DB.ConfirmUserGroups(ctx, u.ID, groups, now); err != nil {
				return nil, err
			}
			u.Groups, u.CheckedAt = groups, now
			if len(Recipients([]store.Recipient{u}, a, team, w.Resolve)) == 0 {
				w.logger().Info("notice not sent: the user's groups no longer qualify", "user_id", u.ID)
				continue
			}
		} else if a.NeedsFreshMembership() && now.Sub(u.CheckedAt) > maxAge {
			w.logger().Info("notice not sent: the user's groups were last confirmed too long ago", "user_id", u.ID, "confirmed_at", u.CheckedAt)
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// directoryAnswer is what the directory said of one user.
type directoryAnswer struct {
	groups []string
	err    error
}

// freshGroups asks the directory itself, not a cache of its answers.
func freshGroups(ctx context.Context, d auth.GroupSource, name string) ([]string, error) {
	if f, ok := d.(auth.FreshGroupSource); ok {
		return f.FreshGroups(ctx, name)
	}
	return d.Groups(ctx, name)
}

func (w *Worker) sendTimeout() time.Duration {
	lease := w.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	return lease / 2
}

func (w *Worker) message(dl store.Delivery, to []string) Message {
	m := Message{OutboxID: dl.OutboxID, Kind: dl.Kind, Team: dl.Team, ConnectionID: dl.ConnectionID, Subject: dl.Subject, Body: dl.Body, To: to}
	if base := strings.TrimRight(w.BaseURL, "/"); base != "" {
		m.Inbox = base + "/notifications"
		if dl.ConnectionID != 0 {
			m.Link = base + "/connections/" + strconv.FormatInt(dl.ConnectionID, 10)
		}
	}
	return m
}

// safeError is the text of a failed send as stored and shown to admins:
// one line, bounded. The senders' errors name no secret (no password, no
// webhook URL: see Webhook.Send).
func safeError(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

func knownAudience(a workflow.Audience) bool {
	switch a {
	case workflow.ToAdmins, workflow.ToTeam, workflow.ToReviewers:
		return true
	}
	_, person := a.Person()
	return person
}

// Recipients resolves an audience at delivery time: the admins or
// reviewers are every user whose last known groups grant that role; the
// team's owners every user whose groups make them an owner of team; one
// person (workflow.ToPerson) the user of that email. A user
// is listed once, in id order.
func Recipients(users []store.Recipient, a workflow.Audience, team string, resolve Resolver) []store.Recipient {
	if resolve == nil {
		return nil
	}
	var out []store.Recipient
	for _, u := range users {
		roles, ms := resolve(u.Groups)
		p := workflow.NewPrincipal(u.ID, "", u.Email, "", roles, ms)
		var in bool
		switch a {
		case workflow.ToAdmins:
			in = p.HasRole(workflow.RoleAdmin)
		case workflow.ToReviewers:
			in = p.HasRole(workflow.RoleReviewer)
		case workflow.ToTeam:
			r, ok := p.TeamRole(team)
			in = ok && r == workflow.TeamOwner && team != ""
		default:
			// One person (a signal's owner): by email, whatever their
			// groups.
			email, ok := a.Person()
			in = ok && strings.EqualFold(u.Email, email)
		}
		if in {
			out = append(out, u)
		}
	}
	return out
}
