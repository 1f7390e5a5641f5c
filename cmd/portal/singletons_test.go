package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/leader"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// singletonWork is what each singleton's first pass leaves in the
// database of TestSingletonsRunOnlyOnTheLeader (a count above zero: it
// ran). Each starts its first pass at once, the review scheduler a
// --review-interval after it starts (review.Scheduler.Run).
var singletonWork = []struct {
	singleton, query string
	cluster          bool // started only with a cluster (--kubeconfig)
}{
	// It claims its loop in the singletons row of its name.
	{"review scheduler", `SELECT count(*) FROM singletons WHERE name = 'review-scheduler'`, false},
	// The seed's notices leave the outbox.
	{"notification delivery", `SELECT count(*) FROM outbox WHERE delivered_at <> ''`, false},
	// Last month is frozen (--rate-card).
	{"month closer", `SELECT count(*) FROM cost_months`, false},
	// A contract whose end date passed gets its hold proposed.
	{"end-date holds", `SELECT count(*) FROM hold_notices`, false},
	{"signals", `SELECT count(*) FROM signal_events`, false},
	// The collector claims the cluster before it watches it.
	{"usage collector", `SELECT count(*) FROM usage_collector`, true},
	// Each active connection's check is saved, drift or not.
	{"drift checker", `SELECT count(*) FROM drift_reports`, true},
}

// TestSingletonsRunOnlyOnTheLeader: a replica that does not hold the
// leader lock runs none of the singletons, and runs them once it is
// handed the lock. The test itself holds the lock (the SQLite file lock
// of --leader-election database, through the portal's own elector) while
// the replica, the whole program as `portal serve` runs it, starts and
// serves as a follower: whatever singleton work the database shows then
// was the follower's. Then the test lets go, as a leader that stops does,
// and the replica takes over and does each singleton's work.
//
// Without a cluster (no --kubeconfig) the drift checker and the usage
// collector are started on no replica (main.go);
// TestSingletonsRunOnlyOnTheLeaderWithCluster covers them on the test
// bed's kube-apiserver.
func TestSingletonsRunOnlyOnTheLeader(t *testing.T) { checkSingletonsOnLeaderOnly(t, "") }

// TestSingletonsRunOnlyOnTheLeaderWithCluster is the same with the test
// bed's kube-apiserver (--kubeconfig): the drift checker and the usage
// collector run too, on the leader only.
func TestSingletonsRunOnlyOnTheLeaderWithCluster(t *testing.T) {
	checkSingletonsOnLeaderOnly(t, testenv.Require(t, "PORTAL_TEST_KUBECONFIG"))
}

func checkSingletonsOnLeaderOnly(t *testing.T, kubeconfig string) {
	ctx := t.Context()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "portal.db")
	db, err := store.OpenMigrated(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Work for every singleton: the demo connections (active, with
	// notices in the outbox), one of them past its end date, and the demo
	// usage, on which signals fire, in last month too.
	now := time.Now()
	if err := seedDev(ctx, db); err != nil { // the cluster's inventory, as --dev
		t.Fatal(err)
	}
	if n, err := seedDemoReviews(ctx, db, provision.ClusterSettings{}.WithDefaults(), now); err != nil || n != len(demoReviewTeams) {
		t.Fatalf("seed: %d reviews, %v", n, err)
	}
	// Usage for the signals (the replica's own seed then leaves it as it is).
	if n, err := seedDemoUsage(ctx, db, now); err != nil || n == 0 {
		t.Fatalf("demo usage: %d rows, %v", n, err)
	}
	past := now.UTC().AddDate(0, 0, -2).Format(time.DateOnly)
	// (Approved versions are immutable, by trigger: the test lifts it for
	// this one change, as if the contract had been filed with that date.)
	if err := db.ExecForTest(ctx, `DROP TRIGGER contract_versions_immutable`,
		`UPDATE contract_versions SET body = json_set(body, '$.end_date', '`+past+`') WHERE connection_id = (SELECT min(id) FROM connections)`,
		`CREATE TRIGGER contract_versions_immutable BEFORE UPDATE ON contract_versions
BEGIN SELECT RAISE(ABORT, 'contract versions are immutable'); END`); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	work := func() (done, none []string) {
		t.Helper()
		for _, w := range singletonWork {
			if w.cluster && kubeconfig == "" {
				continue
			}
			var n int
			if err := raw.QueryRowContext(ctx, w.query).Scan(&n); err != nil {
				t.Fatalf("%s: %v", w.singleton, err)
			}
			if n > 0 {
				done = append(done, fmt.Sprintf("%s (%d)", w.singleton, n))
			} else {
				none = append(none, w.singleton)
			}
		}
		return done, none
	}
	if done, _ := work(); len(done) > 0 {
		t.Fatalf("before any portal runs, the database shows singleton work: %v", done)
	}
	var pending int
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM outbox`).Scan(&pending); err != nil || pending == 0 {
		t.Fatalf("the seed left %d notices in the outbox (%v), want some to deliver", pending, err)
	}

	// The test leads.
	holder, err := leader.NewAdvisory(db, "test-leader", leader.Default, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	holdCtx, letGo := context.WithCancel(ctx)
	defer letGo()
	leading, released := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(released)
		holder.Run(holdCtx, func(ctx context.Context) { close(leading); <-ctx.Done() })
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("the test did not get the leader lock of a database no one else uses")
	}

	args := []string{"serve", "--dev", "--listen", "127.0.0.1:0", "--db", dbPath,
		"--session-key-file", filepath.Join(dir, "session.key"), "--leader-id", "replica-f",
		"--leader-election", "database", "--rate-card", "../../hack/demo-rate-card.json", "--review-interval", "1s"}
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	p := serveInProcess(t, args...)
	client := &http.Client{Timeout: 5 * time.Second}
	waitFor(t, client, p.url+"/readyz", "leader: test-leader (sqlite file lock)\nthis process: replica-f (follower)\n")
	// Long enough for every singleton's first pass had the follower
	// started them (they would have started before the server did): the
	// review scheduler's comes a second after, the others at once.
	time.Sleep(3 * time.Second)
	if done, _ := work(); len(done) > 0 {
		t.Errorf("a follower did singleton work: %v\nlog:\n%s", done, p.logs.String())
	}
	waitFor(t, client, p.url+"/metrics", `portal_is_leader{identity="replica-f"} 0`)

	// The hand-over: the test stops leading (its lock released), and the
	// replica runs every singleton.
	letGo()
	<-released
	waitFor(t, client, p.url+"/metrics", `portal_is_leader{identity="replica-f"} 1`)
	var none []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, none = work(); len(none) == 0 {
			break
		}
	}
	if len(none) > 0 {
		t.Errorf("after the hand-over the new leader did no work of %v\nlog:\n%s", none, p.logs.String())
	}
	if err := p.stop(); err != nil {
		t.Errorf("run after cancel = %v\nlog:\n%s", err, p.logs.String())
	}
}

// inProcess is the whole program running in this process (run), as
// `portal serve` runs: its URL and its log.
type inProcess struct {
	url  string
	logs *testenv.Buffer
	stop func() error // cancels run's context and returns what run returned
}

// serveInProcess runs the program with args until the test ends (or stop),
// reading its URL from the ready line --dev prints.
func serveInProcess(t *testing.T, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	logs := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, env{}.get, pw, logs)
		pw.Close()
		done <- err
	}()
	// Read stdout line by line until the ready line, then keep draining it.
	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := readyRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case base <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	var returned error
	stopped := false
	stop := func() error {
		if stopped {
			return returned
		}
		stopped = true
		cancel()
		select {
		case returned = <-done:
		case <-time.After(20 * time.Second):
			returned = fmt.Errorf("run did not return within 20s of cancel")
		}
		return returned
	}
	t.Cleanup(func() { _ = stop() })
	p := &inProcess{logs: logs, stop: stop}
	select {
	case p.url = <-base:
	case err := <-done:
		t.Fatalf("run returned before it was ready: %v\nlog:\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("no ready line within 60s\nlog:\n%s", logs.String())
	}
	return p
}
