package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/notify"
)

func TestNotifyConfig(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr []string // substrings; none: valid
	}{
		{name: "none configured", args: prod()},
		{name: "email with STARTTLS and AUTH", args: prod("smtp-addr", "smtp.example.com:587", "smtp-from", "portal@example.com",
			"smtp-username", "portal", "smtp-password-file", "/run/secrets/smtp")},
		{name: "email without AUTH", args: prod("smtp-addr", "smtp.example.com:587", "smtp-from", "portal@example.com")},
		{name: "plaintext towards loopback", args: prod("smtp-addr", "127.0.0.1:1025", "smtp-from", "portal@example.com", "smtp-insecure-plaintext", "true")},
		{name: "plaintext elsewhere", args: prod("smtp-addr", "smtp.example.com:25", "smtp-from", "portal@example.com", "smtp-insecure-plaintext", "true"),
			wantErr: []string{"--smtp-insecure-plaintext: \"smtp.example.com:25\" is not a loopback address"}},
		{name: "no from", args: prod("smtp-addr", "smtp.example.com:587"), wantErr: []string{"--smtp-from"}},
		{name: "from with a name", args: prod("smtp-addr", "smtp.example.com:587", "smtp-from", "Portal <portal@example.com>"), wantErr: []string{"--smtp-from"}},
		{name: "no port", args: prod("smtp-addr", "smtp.example.com", "smtp-from", "portal@example.com"), wantErr: []string{"--smtp-addr"}},
		{name: "username without password", args: prod("smtp-addr", "smtp.example.com:587", "smtp-from", "portal@example.com", "smtp-username", "u"),
			wantErr: []string{"--smtp-username and --smtp-password-file go together"}},
		{name: "smtp settings without address", args: prod("smtp-from", "portal@example.com"), wantErr: []string{"need --smtp-addr"}},
		{name: "webhook", args: prod("webhook-url", "https://hooks.example.com/services/T/B/X", "webhook-secret-file", "/run/secrets/hook")},
		{name: "webhook unsigned", args: prod("webhook-url", "https://hooks.example.com/x"), wantErr: []string{"--webhook-secret-file: required"}},
		{name: "webhook over http", args: prod("webhook-url", "http://hooks.example.com/services/T/B/TOKEN", "webhook-secret-file", "/s"),
			wantErr: []string{"--webhook-url: must be an https URL"}},
		{name: "webhook on loopback http", args: prod("webhook-url", "http://127.0.0.1:9000/hook", "webhook-secret-file", "/s")},
		{name: "secret without webhook", args: prod("webhook-secret-file", "/s"), wantErr: []string{"set without --webhook-url"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig("serve", tt.args, env{}.get, io.Discard)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "TOKEN") {
				t.Errorf("the error quotes the webhook URL: %v", err)
			}
		})
	}
}

// TestNotifyWorkerChannels: the channels are the configured ones, the
// secrets come from owner-only files, and the password is never logged.
func TestNotifyWorkerChannels(t *testing.T) {
	dir := t.TempDir()
	pw, hook := filepath.Join(dir, "smtp"), filepath.Join(dir, "hook")
	for _, f := range []string{pw, hook} {
		if err := os.WriteFile(f, []byte("very-secret-value\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	w, names, err := notifyWorker(NotifyConfig{}, nil, auth.DevMapping(), "https://p.example", logger)
	if err != nil || !slices.Equal(names, []string{"inapp"}) || w.Email != nil || w.Webhook != nil {
		t.Fatalf("nothing configured: %v %v %+v", names, err, w)
	}
	w, names, err = notifyWorker(NotifyConfig{SMTPAddr: "smtp.example.com:587", SMTPFrom: "p@example.com", SMTPUsername: "u", SMTPPasswordFile: pw,
		WebhookURL: "https://hooks.example.com/x", WebhookSecretFile: hook}, nil, auth.DevMapping(), "https://p.example", logger)
	if err != nil || !slices.Equal(names, []string{"inapp", "email", "webhook"}) {
		t.Fatalf("both configured: %v %v", names, err)
	}
	if ml := w.Email.(*notify.Mailer); ml.Password != "very-secret-value" || ml.InsecurePlaintext {
		t.Errorf("mailer = %+v", ml)
	}
	if wh := w.Webhook.(*notify.Webhook); string(wh.Secret) != "very-secret-value" {
		t.Errorf("webhook secret not read")
	}
	// A secret readable by others is refused, naming the file only.
	if err := os.Chmod(pw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = notifyWorker(NotifyConfig{SMTPAddr: "smtp.example.com:587", SMTPFrom: "p@example.com", SMTPUsername: "u", SMTPPasswordFile: pw},
		nil, auth.DevMapping(), "", logger)
	if err == nil || !strings.Contains(err.Error(), "--smtp-password-file") || strings.Contains(err.Error(), "very-secret-value") {
		t.Errorf("group-readable password file: %v", err)
	}
	if strings.Contains(logs.String(), "very-secret-value") {
		t.Errorf("a secret was logged:\n%s", logs.String())
	}
}
