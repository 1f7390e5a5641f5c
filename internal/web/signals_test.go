package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// idleRed: team red's live connection held nothing of its guarantee for
// 14 days while the collector ran, and the cluster's 100 GPUs stood idle:
// the evaluator fires red's allocation signal (event 1 or 2) and the
// cluster's capacity signal.
func idleRed(t *testing.T, h *harness) (red, cluster store.SignalEvent) {
	t.Helper()
	ctx := context.Background()
	activeRed(t, h)
	now := h.srv.opts.Now()
	var ch []usage.ClusterHour
	for i := 1; i <= 14*24; i++ {
		ch = append(ch, usage.ClusterHour{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: usage.HourStart(now).Add(-time.Duration(i) * time.Hour), CapacityAccelSeconds: 100 * 3600})
	}
	if err := h.db.PutClusterHours(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if n, err := NewSignals(h.db, h.srv.opts.Cluster, nil, nil).Evaluate(ctx, now); err != nil || n != 2 {
		t.Fatalf("Evaluate = %d, %v", n, err)
	}
	evs, _ := h.db.SignalEvents(ctx, store.SignalFilter{})
	for _, e := range evs {
		if e.Team == "red" {
			red = e
		} else {
			cluster = e
		}
	}
	if red.ID == 0 || cluster.ID == 0 {
		t.Fatalf("events = %+v", evs)
	}
	return red, cluster
}

func itoa64(n int64) string { return itoa0(int(n)) }

// The team's signals page and the acknowledgement: members read, the
// team's owner acknowledges with a required note (kept on a refusal),
// the event then shows who and why, with an audit event; other teams get
// 404 on the page and on the form, even for an event id of red's through
// their own team's URL; the cluster's event is the admins'.
func TestSignalsPageAndAcknowledgement(t *testing.T) {
	h := newHarness(t, false)
	red, cluster := idleRed(t, h)
	ctx := context.Background()
	member, owner, blue, admin := h.signIn("member.red"), h.signIn("owner.red"), h.signIn("owner.blue"), h.signIn("admin")
	ack := "/teams/red/signals/" + itoa64(red.ID) + "/ack"

	resp, body := h.get(member.c, "/teams/red/signals")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("member GET = %d", resp.StatusCode)
	}
	for _, want := range []string{"Allocation vs utilization", "Task run and wait times", "Pending and preempted tasks",
		"member.red@example.test", "Below 40% for 7 days",
		// The cost jump: nothing used in either week, both recorded.
		`data-testid="signal-red-Cost jump"`, "used 0.0 accelerator-hours in the last 7 days against 0.0 in the 7 days before (no change)",
		"owner.red@example.test: No response named in the contract: the cost owner decides.",
		`data-testid="signal-event-` + itoa64(red.ID), `data-testid="signal-open"`} {
		if !strings.Contains(body, want) {
			t.Errorf("member's signals page lacks %q", want)
		}
	}
	if strings.Contains(body, `data-testid="ack-form"`) || strings.Contains(body, "Node health") {
		t.Error("a member gets an acknowledgement form, or the team page shows the cluster's signals")
	}
	if resp, _ := h.postAs(member, ack, url.Values{"note": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("member ack = %d, want 403", resp.StatusCode)
	}
	for _, path := range []string{"/teams/red/signals", ack} {
		var resp *http.Response
		if strings.HasSuffix(path, "/ack") {
			resp, _ = h.postAs(blue, path, url.Values{"note": {"x"}})
		} else {
			resp, _ = h.get(noRedirect(blue.c), path)
		}
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("owner.blue %s = %d, want 404", path, resp.StatusCode)
		}
	}
	// Blue's own URL with red's event id, and red's URL with the cluster's.
	if resp, _ := h.postAs(blue, "/teams/blue/signals/"+itoa64(red.ID)+"/ack", url.Values{"note": {"x"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("owner.blue acking red's event through blue's URL = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.postAs(owner, "/teams/red/signals/"+itoa64(cluster.ID)+"/ack", url.Values{"note": {"x"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("owner.red acking the cluster's event = %d, want 404", resp.StatusCode)
	}

	_, body = h.get(owner.c, "/teams/red/signals")
	if !strings.Contains(body, `data-testid="ack-form"`) {
		t.Fatal("the owner has no acknowledgement form")
	}
	resp, body = h.postAs(owner, ack, url.Values{"note": {"   "}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="ack-error"`) {
		t.Errorf("empty note = %d", resp.StatusCode)
	}
	long := strings.Repeat("é", maxAckNote+1)
	resp, body = h.postAs(owner, ack, url.Values{"note": {long}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, long) {
		t.Errorf("too long a note = %d, or the input was not kept", resp.StatusCode)
	}
	if e, _ := h.db.SignalEvent(ctx, red.ID); !e.Open() {
		t.Fatal("a refused acknowledgement was stored")
	}
	if resp, _ := h.postAs(owner, ack, url.Values{"note": {"Jobs start <Monday>."}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("owner ack = %d", resp.StatusCode)
	}
	_, body = h.get(member.c, "/teams/red/signals")
	if !strings.Contains(body, "Acknowledged by owner.red@example.test") || !strings.Contains(body, "Jobs start &lt;Monday&gt;.") {
		t.Error("the acknowledged event does not show who and the (escaped) note")
	}
	if n := h.auditCount("signal.acknowledge"); n != 1 {
		t.Errorf("audit events = %d, want 1", n)
	}
	if resp, _ := h.postAs(owner, ack, url.Values{"note": {"again"}}); resp.StatusCode != http.StatusConflict {
		t.Errorf("second ack = %d, want 409", resp.StatusCode)
	}

	// The admins' page: the cluster's signals and every team's.
	resp, body = h.get(admin.c, "/admin/signals")
	if !strings.Contains(body, `name="id" value="`+itoa64(cluster.ID)+`"`) {
		t.Error("the admins' form does not name the cluster's event")
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Node health and recovery events") || !strings.Contains(body, "Cluster capacity and accelerator utilization") ||
		!strings.Contains(body, `data-testid="signal-red-Cost jump"`) ||
		!strings.Contains(body, "platform admins") {
		t.Errorf("admin signals page = %d", resp.StatusCode)
	}
	if resp, _ := h.postAs(admin, "/admin/signals/ack", url.Values{"id": {itoa64(cluster.ID)}, "note": {"Idle until the new quarter's jobs."}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("admin ack of the cluster's event = %d", resp.StatusCode)
	}
	if resp, _ := h.postAs(owner, "/admin/signals/ack", url.Values{"id": {itoa64(cluster.ID)}, "note": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("owner via the admin URL = %d, want 403", resp.StatusCode)
	}
}

// lowUtil is a utilization source whose GPUs in hyperpod-ns-red were 10%
// busy every hour asked (the Prometheus client itself is tested against a
// real Prometheus in internal/usage/prom).
type lowUtil struct{ asked *[]string }

func (f lowUtil) NamespaceUtilization(_ context.Context, ns string, from, to time.Time, step time.Duration) ([]usage.Point, error) {
	*f.asked = append(*f.asked, ns)
	var out []usage.Point
	if ns == "hyperpod-ns-red" {
		for at := from; at.Before(to); at = at.Add(step) {
			out = append(out, usage.Point{At: at, Percent: 10})
		}
	}
	return out, nil
}

func (f lowUtil) NamespacesUtilization(context.Context, time.Time, time.Time, time.Duration) (map[string][]usage.Point, error) {
	return nil, errors.New("not used by the signals")
}

// Team red held 8 GPUs for the last day and they were 10% busy: below the
// example contract's "Below 40% for 7 days", so the utilization signal
// fires once (evaluating again stores nothing), and red's signals page
// shows it with the contract's floor, the measured mean, and the owner
// and response of the contract's "Accelerator utilization" signal.
// Without a utilization source the page says what it needs.
func TestUtilizationSignalFiresAndShows(t *testing.T) {
	var asked []string
	h := newHarness(t, false, frozenClock, func(o *Options) { o.Utilization = lowUtil{asked: &asked} })
	ctx := context.Background()
	activeRed(t, h)
	now := h.srv.opts.Now()
	var rows []usage.Hour
	for i := 1; i <= 24; i++ {
		rows = append(rows, usage.Hour{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
			Start: usage.HourStart(now).Add(-time.Duration(i) * time.Hour), GuaranteedAccelSeconds: 8 * 3600,
			WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster})
	}
	if err := h.db.PutUsageHours(ctx, rows); err != nil {
		t.Fatal(err)
	}
	sig := h.srv.Signals(nil) // what cmd/portal's loop runs
	if n, err := sig.Evaluate(ctx, now); err != nil || n != 1 {
		t.Fatalf("Evaluate = %d, %v; want 1 (red's utilization; every other signal lacks data)", n, err)
	}
	if n, err := sig.Evaluate(ctx, now); err != nil || n != 0 {
		t.Fatalf("second Evaluate = %d, %v; want 0 (still open)", n, err)
	}
	if len(asked) == 0 || asked[0] != "hyperpod-ns-red" {
		t.Errorf("asked the source for %v", asked)
	}
	evs, _ := h.db.SignalEvents(ctx, store.SignalFilter{Teams: []string{"red"}})
	if len(evs) != 1 || evs[0].Signal != usage.SignalUtilization || !evs[0].Open() || evs[0].Owner != "member.red@example.test" ||
		!strings.Contains(evs[0].Detail, "mean utilization 10.0%") {
		t.Fatalf("red's events = %+v", evs)
	}
	resp, body := h.get(h.signIn("member.red").c, "/teams/red/signals")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	for _, want := range []string{"Utilization below the contract&#39;s floor", "mean utilization 10.0% over 192.0 accelerator-hours",
		"less than 40% busy over 7 days", "states a floor of 40%", "Below 40% for 7 days: propose a smaller guarantee",
		`data-testid="signal-event-` + itoa64(evs[0].ID)} {
		if !strings.Contains(body, want) {
			t.Errorf("red's signals page lacks %q", want)
		}
	}
	if strings.Contains(body, "needs --prometheus-url") {
		t.Error("the page evaluates without the portal's utilization source")
	}

	h2 := newHarness(t, false, frozenClock)
	activeRed(t, h2)
	_, body = h2.get(h2.signIn("member.red").c, "/teams/red/signals")
	if !strings.Contains(body, "needs --prometheus-url") {
		t.Error("without a source the utilization signal does not say what it needs")
	}
}
