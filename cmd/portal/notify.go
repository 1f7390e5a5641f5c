package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/url"
	"strings"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/notify"
	"github.com/hyperpod-governance/portal/internal/store"
)

// NotifyConfig is how notices leave the portal besides the in-app list:
// email over SMTP and a signed webhook, each off when its address is empty.
type NotifyConfig struct {
	SMTPAddr          string // host:port; empty: no email
	SMTPFrom          string
	SMTPUsername      string
	SMTPPasswordFile  string
	SMTPInsecurePlain bool // no STARTTLS: only towards a loopback server
	WebhookURL        string
	WebhookSecretFile string
}

// notifySpecs are the notification flags (see docs/configuration.md).
var notifySpecs = []flagSpec{
	{"smtp-addr", "PORTAL_SMTP_ADDR", "", "SMTP submission server host:port (e.g. smtp.example.com:587) that notices are emailed through; empty: no email", false},
	{"smtp-from", "PORTAL_SMTP_FROM", "", "sender address of notice emails (required with --smtp-addr)", false},
	{"smtp-username", "PORTAL_SMTP_USERNAME", "", "SMTP AUTH user name (PLAIN or LOGIN, after STARTTLS); empty: no AUTH", false},
	{"smtp-password-file", "PORTAL_SMTP_PASSWORD_FILE", "", "file holding the SMTP password (required with --smtp-username; owner-only)", false},
	{"smtp-insecure-plaintext", "PORTAL_SMTP_INSECURE_PLAINTEXT", "false", "send email without STARTTLS; allowed only when --smtp-addr is a loopback address (a local relay or test server)", true},
	{"webhook-url", "PORTAL_WEBHOOK_URL", "", "URL notices are POSTed to as Slack-compatible JSON ({\"text\": ...}), signed (X-Portal-Signature); https, http only on loopback; empty: no webhook", false},
	{"webhook-secret-file", "PORTAL_WEBHOOK_SECRET_FILE", "", "file holding the webhook's HMAC-SHA256 signing secret (required with --webhook-url; owner-only)", false},
}

func init() { specs = append(specs, notifySpecs...) }

func notifyConfig(vals map[string]*string, boolean func(string) bool) NotifyConfig {
	get := func(k string) string { return strings.TrimSpace(*vals[k]) }
	return NotifyConfig{
		SMTPAddr: get("smtp-addr"), SMTPFrom: get("smtp-from"), SMTPUsername: get("smtp-username"),
		SMTPPasswordFile: get("smtp-password-file"), SMTPInsecurePlain: boolean("smtp-insecure-plaintext"),
		WebhookURL: get("webhook-url"), WebhookSecretFile: get("webhook-secret-file"),
	}
}

func (n NotifyConfig) validate() []error {
	var errs []error
	if n.SMTPAddr == "" {
		if n.SMTPFrom != "" || n.SMTPUsername != "" || n.SMTPPasswordFile != "" || n.SMTPInsecurePlain {
			errs = append(errs, errors.New("--smtp-from, --smtp-username, --smtp-password-file and --smtp-insecure-plaintext need --smtp-addr"))
		}
	} else {
		host, port, err := net.SplitHostPort(n.SMTPAddr)
		if err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("--smtp-addr: %q is not host:port such as smtp.example.com:587", n.SMTPAddr))
		} else if n.SMTPInsecurePlain && !isLoopbackHost(host) {
			errs = append(errs, fmt.Errorf("--smtp-insecure-plaintext: %q is not a loopback address; email to another host goes over STARTTLS", n.SMTPAddr))
		}
		if a, err := mail.ParseAddress(n.SMTPFrom); n.SMTPFrom == "" || err != nil || a.Name != "" {
			errs = append(errs, fmt.Errorf("--smtp-from: %q must be an email address such as portal@example.com", n.SMTPFrom))
		}
		if (n.SMTPUsername == "") != (n.SMTPPasswordFile == "") {
			errs = append(errs, errors.New("--smtp-username and --smtp-password-file go together"))
		}
	}
	if n.WebhookURL == "" {
		if n.WebhookSecretFile != "" {
			errs = append(errs, errors.New("--webhook-secret-file: set without --webhook-url"))
		}
		return errs
	}
	// The URL is a secret (Slack's carry a token): errors do not quote it.
	if u, err := url.Parse(n.WebhookURL); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname()))) {
		errs = append(errs, errors.New("--webhook-url: must be an https URL (http only on loopback)"))
	}
	if n.WebhookSecretFile == "" {
		errs = append(errs, errors.New("--webhook-secret-file: required with --webhook-url (every webhook is signed)"))
	}
	return errs
}

// notifyWorker is the outbox's delivery worker with the configured
// channels, and their names for the admins' page.
func notifyWorker(n NotifyConfig, db *store.DB, mapping auth.Mapping, baseURL string, logger *slog.Logger) (*notify.Worker, []string, error) {
	w := &notify.Worker{DB: db, Resolve: mapping.Resolve, BaseURL: baseURL, Logger: logger.With("component", "notify")}
	if n.SMTPAddr != "" {
		ml := &notify.Mailer{Addr: n.SMTPAddr, From: n.SMTPFrom, Username: n.SMTPUsername, InsecurePlaintext: n.SMTPInsecurePlain}
		if n.SMTPUsername != "" {
			var err error
			if ml.Password, err = readSecretFile("smtp-password-file", n.SMTPPasswordFile); err != nil {
				return nil, nil, err
			}
		}
		w.Email = ml
	}
	if n.WebhookURL != "" {
		secret, err := readSecretFile("webhook-secret-file", n.WebhookSecretFile)
		if err != nil {
			return nil, nil, err
		}
		w.Webhook = &notify.Webhook{URL: n.WebhookURL, Secret: []byte(secret)}
	}
	var names []string
	for _, ch := range w.Channels() {
		names = append(names, string(ch))
	}
	return w, names, nil
}
