package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The webhook's headers. A receiver verifies a delivery with the shared
// secret (--webhook-secret-file):
//
//	mac = HMAC-SHA256(secret, X-Portal-Timestamp + "." + body)
//	X-Portal-Signature == "sha256=" + hex(mac)   (compare in constant time)
//
// and refuses a timestamp (Unix seconds) more than a few minutes from its
// clock, so a captured request cannot be replayed later. Verify does both.
const (
	HeaderSignature = "X-Portal-Signature"
	HeaderTimestamp = "X-Portal-Timestamp"
	// HeaderDelivery names the outbox row: the same notice sent twice
	// (after a crash between sending and recording) has the same value.
	HeaderDelivery = "X-Portal-Delivery"
	HeaderEvent    = "X-Portal-Event"
)

// Webhook posts notices as Slack-compatible JSON ({"text": ...}, what a Slack
// incoming webhook takes) to URL, signed with Secret.
type Webhook struct {
	URL    string // a secret too (Slack's carry a token): never logged, never in an error
	Secret []byte
	Client *http.Client // nil: a client with a 10s timeout
	Now    func() time.Time
}

// Sign is the signature header's value of body sent at timestamp ts.
func Sign(secret []byte, ts string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a received webhook: the signature over ts and body, and that
// ts is within maxSkew of now.
func Verify(secret []byte, ts, signature string, body []byte, now time.Time, maxSkew time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("webhook: bad timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > maxSkew || d < -maxSkew {
		return errors.New("webhook: timestamp too far from now")
	}
	if !hmac.Equal([]byte(signature), []byte(Sign(secret, ts, body))) {
		return errors.New("webhook: bad signature")
	}
	return nil
}

// slackEscape escapes the three characters Slack reads as markup
// (https://api.slack.com/reference/surfaces/formatting#escaping: &, <, >),
// so a notice's text cannot ping a channel or forge a link.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Text is the message's "text": the subject, a link to the connection
// in Slack's <url|label> form, and the body (if any) on the lines after.
func (m Message) text() string {
	t := slackEscape(oneLine(m.Subject))
	if m.Link != "" {
		t += " <" + slackEscape(m.Link) + "|open in the portal>"
	}
	if m.Body != "" {
		t += "\n" + slackEscape(strings.TrimRight(m.Body, "\n"))
	}
	return t
}

// Send posts m. Any answer but 2xx is a failure (redirects are not followed:
// a POST must not turn into a GET elsewhere). The error never holds the URL.
func (h *Webhook) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(map[string]string{"text": m.text()})
	if err != nil {
		return err
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	ts := strconv.FormatInt(now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("webhook: the URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(h.Secret, ts, body))
	req.Header.Set(HeaderDelivery, strconv.FormatInt(m.OutboxID, 10))
	req.Header.Set(HeaderEvent, oneLine(m.Kind))
	client := h.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		// *url.Error's text quotes the URL, which may carry a token.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook: the receiver answered %s", resp.Status)
	}
	return nil
}
