package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/migrations"
)

func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no embedded migrations (%v)", err)
	}
	// The highest number: the schema version after migrating (numbers are
	// assigned per branch, so one may be missing until branches merge).
	n, err := strconv.Atoi(files[len(files)-1][:5])
	if err != nil {
		t.Fatalf("migration %s: %v", files[len(files)-1], err)
	}
	return n
}

func TestRunCommands(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    string // substring; empty means success
		wantErrIs  error
		wantStdout string
		wantStderr string
	}{
		{name: "version", args: []string{"version"}, wantStdout: "portal " + version + " ("},
		{name: "help", args: []string{"help"}, wantStdout: "usage: portal [serve|migrate|version]"},
		{name: "--help", args: []string{"--help"}, wantErrIs: flag.ErrHelp, wantStderr: "usage: portal serve [flags]"},
		{name: "serve --help", args: []string{"serve", "-h"}, wantErrIs: flag.ErrHelp, wantStderr: "[PORTAL_DEV]"},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate"`},
		{name: "bad flag", args: []string{"migrate", "--no-such-flag"}, wantErr: "no-such-flag"},
		{name: "bad config stops before serving", args: []string{"serve", "--listen=nonsense"}, wantErr: "--listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, env{}.get, &stdout, &stderr)
			switch {
			case tt.wantErrIs != nil:
				if !errors.Is(err, tt.wantErrIs) {
					t.Errorf("run(%q) = %v, want %v", tt.args, err, tt.wantErrIs)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("run(%q): %v", tt.args, err)
			}
			if !strings.HasPrefix(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to start with %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestRunMigrate(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sub", "portal.db")
	n := migrationCount(t)
	steps := []string{
		fmt.Sprintf("schema version 0 -> %d (this binary knows up to %d)", n, n),
		fmt.Sprintf("schema version %d -> %d", n, n), // a second run changes nothing
	}
	for i, want := range steps {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), []string{"migrate", "--db", db}, env{}.get, &stdout, &stderr); err != nil {
			t.Fatalf("migrate #%d: %v\nstderr: %s", i+1, err, stderr.String())
		}
		if !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), db) {
			t.Errorf("migrate #%d printed %q, want %q and the path", i+1, stdout.String(), want)
		}
	}
}

var readyRE = regexp.MustCompile(`ready: open (http://127\.0\.0\.1:\d+)/`)

// TestServeDev starts the whole program as `make run` does, checks the
// probes and the landing page, and shuts it down through its context.
func TestServeDev(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys", "session.key")
	args := []string{"serve", "--dev", "--listen", "127.0.0.1:0",
		"--db", filepath.Join(dir, "portal.db"), "--session-key-file", keyFile, "--leader-id", "dev-test_1"}

	p := serveInProcess(t, args...)
	url := p.url

	client := &http.Client{Timeout: 5 * time.Second}
	checks := []struct {
		path       string
		wantStatus int
		wantBody   string
	}{
		{"/healthz", http.StatusOK, "ok"},
		{"/readyz", http.StatusOK, "ready"},
		{"/", http.StatusOK, `data-testid="dev-banner"`},
	}
	for _, c := range checks {
		resp, err := client.Get(url + c.path)
		if err != nil {
			t.Fatalf("GET %s: %v", c.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: reading body: %v", c.path, err)
		}
		if resp.StatusCode != c.wantStatus {
			t.Errorf("GET %s = %d, want %d\n%s", c.path, resp.StatusCode, c.wantStatus, body)
		}
		if !strings.Contains(string(body), c.wantBody) {
			t.Errorf("GET %s body does not contain %q:\n%s", c.path, c.wantBody, body)
		}
	}

	// The only process is elected (the SQLite file lock, without a
	// cluster): /readyz and /metrics name it.
	waitFor(t, client, url+"/readyz", "leader: dev-test_1 (sqlite file lock)\nthis process: dev-test_1 (leader)\n")
	waitFor(t, client, url+"/metrics", `portal_is_leader{identity="dev-test_1"} 1`)
	waitFor(t, client, url+"/metrics", `portal_leader{identity="dev-test_1",lock="sqlite file lock"} 1`)

	// --dev creates the session key on first start, readable only by us.
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("session key file not created: %v", err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() < 32 {
		t.Errorf("session key file mode %v, size %d; want 0600 and at least 32 bytes", fi.Mode().Perm(), fi.Size())
	}

	if err := p.stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil (graceful shutdown)\nlog:\n%s", err, p.logs.String())
	}
	if !strings.Contains(p.logs.String(), "stopped") {
		t.Errorf("log does not say the portal stopped:\n%s", p.logs.String())
	}
	if _, err := client.Get(url + "/healthz"); err == nil {
		t.Error("the server still answers after run returned")
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Secrets in files fail with a message that names the file or the flag,
// never the secret itself.
func TestServeSecretFiles(t *testing.T) {
	dir := t.TempDir()
	const shortKey = "s3cr3t-but-too-short"
	shortKeyFile := writeFile(t, filepath.Join(dir, "short.key"), shortKey+"\n")
	goodKeyFile := writeFile(t, filepath.Join(dir, "good.key"), strings.Repeat("k", 64)+"\n")
	groups := writeFile(t, filepath.Join(dir, "groups.yaml"),
		"roles: {admin: [platform-admins]}\nteams:\n  red: {owners: [team-red-owners]}\n")
	emptySecret := writeFile(t, filepath.Join(dir, "empty.secret"), "")
	goodSecret := writeFile(t, filepath.Join(dir, "good.secret"), "client-secret\n")
	// 32 hex characters are 16 random bytes, not 32: refused.
	const hexShortKey = "00112233445566778899aabbccddeeff"
	hexShortKeyFile := writeFile(t, filepath.Join(dir, "hexshort.key"), hexShortKey+"\n")
	// 40 characters that are neither hex nor base64: a passphrase, refused.
	const phraseKey = "correct horse battery staple, but longer!"
	phraseKeyFile := writeFile(t, filepath.Join(dir, "phrase.key"), phraseKey+"\n")
	openKeyFile := writeFile(t, filepath.Join(dir, "open.key"), strings.Repeat("ab", 32)+"\n")
	openSecret := writeFile(t, filepath.Join(dir, "open.secret"), "client-secret\n")
	for _, f := range []string{openKeyFile, openSecret} {
		if err := os.Chmod(f, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	blankSecret := writeFile(t, filepath.Join(dir, "blank.secret"), " \n\t\n")

	prodArgs := func(keyFile, secretFile string) []string {
		return []string{"serve", "--listen=127.0.0.1:0", "--db=" + filepath.Join(dir, "portal.db"),
			"--base-url=http://127.0.0.1:8080", "--oidc-issuer=http://127.0.0.1:1/",
			"--oidc-client-id=portal", "--oidc-client-secret-file=" + secretFile,
			"--groups-file=" + groups, "--session-key-file=" + keyFile}
	}
	tests := []struct {
		name      string
		args      []string
		want      []string
		notWant   string
		wantErrIs error
	}{
		{
			name:    "dev session key too short",
			args:    []string{"serve", "--dev", "--listen=127.0.0.1:0", "--db=" + filepath.Join(dir, "dev.db"), "--session-key-file=" + shortKeyFile},
			want:    []string{"--session-key-file", shortKeyFile, "at least 32"},
			notWant: shortKey,
		},
		{
			name:    "production session key too short",
			args:    prodArgs(shortKeyFile, emptySecret),
			want:    []string{"--session-key-file", shortKeyFile},
			notWant: shortKey,
		},
		{
			name:    "session key of 16 random bytes in hex",
			args:    prodArgs(hexShortKeyFile, goodSecret),
			want:    []string{"--session-key-file", hexShortKeyFile, "16 random bytes", "at least 32"},
			notWant: hexShortKey,
		},
		{
			name:    "session key that is a passphrase",
			args:    prodArgs(phraseKeyFile, goodSecret),
			want:    []string{"--session-key-file", phraseKeyFile, "0 random bytes"},
			notWant: phraseKey,
		},
		{
			name: "session key readable by the group",
			args: prodArgs(openKeyFile, goodSecret),
			want: []string{"--session-key-file", openKeyFile, "0640", "readable by group or others"},
		},
		{
			name: "client secret readable by the group",
			args: prodArgs(goodKeyFile, openSecret),
			want: []string{"--oidc-client-secret-file", openSecret, "0640", "readable by group or others"},
		},
		{
			name:      "production session key missing",
			args:      prodArgs(filepath.Join(dir, "nope.key"), emptySecret),
			want:      []string{"--session-key-file", "nope.key"},
			wantErrIs: os.ErrNotExist,
		},
		{
			name: "empty client secret",
			args: prodArgs(goodKeyFile, emptySecret),
			want: []string{"--oidc-client-secret-file", emptySecret, "is empty"},
		},
		{
			name: "whitespace-only client secret",
			args: prodArgs(goodKeyFile, blankSecret),
			want: []string{"--oidc-client-secret-file", blankSecret, "is empty"},
		},
		{
			name:      "missing client secret",
			args:      prodArgs(goodKeyFile, filepath.Join(dir, "nope.secret")),
			want:      []string{"--oidc-client-secret-file", "nope.secret"},
			wantErrIs: os.ErrNotExist,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr testenv.Buffer
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- run(ctx, tt.args, env{}.get, &stdout, &stderr) }()
			// run either refuses (the error comes back) or gets past the
			// secrets and serves (it logs "portal listening" on stderr): wait for
			// whichever comes first, however slow the machine is.
			var err error
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
		wait:
			for {
				select {
				case err = <-done:
					break wait
				case <-tick.C:
					if strings.Contains(stderr.String(), "portal listening") {
						cancel()
						<-done
						t.Fatalf("run is serving, want an error containing %q\nstdout: %s", tt.want, stdout.String())
					}
				}
			}
			if err == nil {
				t.Fatalf("run succeeded, want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.wantErrIs != nil && !errors.Is(err, tt.wantErrIs) {
				t.Errorf("error %v is not %v", err, tt.wantErrIs)
			}
			if tt.notWant != "" {
				for where, s := range map[string]string{"error": err.Error(), "stdout": stdout.String(), "stderr": stderr.String()} {
					if strings.Contains(s, tt.notWant) {
						t.Errorf("%s reveals the secret: %q", where, s)
					}
				}
			}
		})
	}
}

// `portal migrate` takes a PostgreSQL URL, and neither its output nor its
// errors show the URL's password.
func TestRunMigratePostgres(t *testing.T) {
	u, err := url.Parse(testenv.PostgresDB(t, "portal_cmd", true))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	const password = "s3cret-pw"
	u.User = url.UserPassword(u.User.Username(), password) // the test bed trusts 127.0.0.1: any password passes
	n := migrationCount(t)
	for i, want := range []string{fmt.Sprintf("schema version 0 -> %d", n), fmt.Sprintf("schema version %d -> %d", n, n)} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), []string{"migrate", "--db", u.String()}, env{}.get, &stdout, &stderr); err != nil {
			t.Fatalf("migrate #%d: %v\nstderr: %s", i+1, err, stderr.String())
		}
		out := stdout.String() + stderr.String()
		if !strings.Contains(out, want) || !strings.Contains(out, "/"+name) || strings.Contains(out, password) {
			t.Errorf("migrate #%d printed %q, want %q and the database, without the password", i+1, out, want)
		}
	}
	u.Host = "127.0.0.1:1" // nothing listens there
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"migrate", "--db", u.String()}, env{}.get, &stdout, &stderr)
	if err == nil || strings.Contains(err.Error()+stdout.String()+stderr.String(), password) {
		t.Errorf("migrate on a closed port: %v (output %q %q), want an error without the password", err, stdout.String(), stderr.String())
	}
}

// waitFor gets url until its body contains want (the election runs beside
// the server), failing after a failsafe wait, not a timing.
func waitFor(t *testing.T, client *http.Client, url, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if resp, err := client.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if last = string(b); strings.Contains(last, want) {
				return last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s never contained %q; last:\n%s", url, want, last)
	return ""
}
