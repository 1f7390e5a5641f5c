package store_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The notice scope the queries apply is the ActionReadNotice rule (the
// rows carry the team and personal flag DeliverInApp copies from the
// outbox; the notify and web tests deliver for real): for
// principals of every kind and notices about no team, about red, about
// blue and addressed to the reader by name, the list, the unread count
// and mark-read keep exactly the notices Decide lets the reader read.
func TestNoticeScopeIsTheReadNoticeRule(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, true)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	u, err := db.RecordLogin(ctx, "iss", "reader", "reader@example.test", "", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	type notice struct {
		team     string
		personal bool
	}
	notices := []notice{{"", false}, {"red", false}, {"blue", false}, {"red", true}}
	for i, n := range notices {
		audience := string(workflow.ToTeam)
		if n.personal {
			audience = string(workflow.ToPerson(u.Email))
		}
		if err := db.ExecForTest(ctx,
			fmt.Sprintf(`INSERT INTO outbox (team, kind, recipients, subject, created_at) VALUES ('%s', 'k', '%s', 's', '2026-12-01T09:00:00Z')`, n.team, audience),
			fmt.Sprintf(`INSERT INTO notifications (user_id, outbox_id, kind, subject, created_at, team, personal) VALUES (%d, (SELECT max(id) FROM outbox), 'k', 's%d', '2026-12-01T09:00:00Z', '%s', %d)`,
				u.ID, i, n.team, map[bool]int{false: 0, true: 1}[n.personal])); err != nil {
			t.Fatal(err)
		}
	}
	all, err := db.Notifications(ctx, u.ID, workflow.NoticeScope{AllTeams: true}, 10)
	if err != nil || len(all) != len(notices) {
		t.Fatalf("stored notices = %v, %v", all, err)
	}
	idOf := map[string]int64{}
	for _, n := range all {
		idOf[n.Subject] = n.ID
	}
	principals := map[string]workflow.Principal{
		"owner of red":   workflow.NewPrincipal(u.ID, "s", u.Email, "", nil, []workflow.Membership{{Team: "red", Role: workflow.TeamOwner}}),
		"member of blue": workflow.NewPrincipal(u.ID, "s", u.Email, "", nil, []workflow.Membership{{Team: "blue", Role: workflow.TeamMember}}),
		"admin":          workflow.NewPrincipal(u.ID, "s", u.Email, "", []workflow.Role{workflow.RoleAdmin}, nil),
		"reviewer":       workflow.NewPrincipal(u.ID, "s", u.Email, "", []workflow.Role{workflow.RoleReviewer}, nil),
		"finance":        workflow.NewPrincipal(u.ID, "s", u.Email, "", []workflow.Role{workflow.RoleFinance}, nil),
		"no access":      workflow.NewPrincipal(u.ID, "s", u.Email, "", nil, nil),
	}
	// Through a token limited to teams (workflow.TokenNoticeScope): also
	// only what the token covers, even a notice addressed by name.
	tokens := map[string]workflow.Token{}
	for _, name := range slices.Sorted(maps.Keys(principals)) {
		p := principals[name]
		for _, limit := range [][]string{nil, {"blue"}} {
			principals[fmt.Sprintf("%s, token limited to %v", name, limit)] = p
			tokens[fmt.Sprintf("%s, token limited to %v", name, limit)] = workflow.Token{Teams: limit}
		}
	}
	for name, p := range principals {
		scope := workflow.TokenNoticeScope(p, tokens[name])
		var want []string
		for i, n := range notices {
			if workflow.Decide(p, workflow.ActionReadNotice, workflow.Object{Team: n.team, Personal: n.personal}).Allowed &&
				(n.team == "" || workflow.TokenCoversTeam(tokens[name], n.team)) {
				want = append(want, fmt.Sprintf("s%d", i))
			}
		}
		ns, err := db.Notifications(ctx, u.ID, scope, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range ns {
			got = append(got, n.Subject)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: listed %v, Decide allows %v", name, got, want)
		}
		if n, err := db.UnreadNotifications(ctx, u.ID, scope); err != nil || n != len(want) {
			t.Errorf("%s: unread %d (%v), want %d", name, n, err, len(want))
		}
		for i := range notices {
			allowed := slices.Contains(want, fmt.Sprintf("s%d", i))
			err := db.MarkNotificationRead(ctx, u.ID, scope, idOf[fmt.Sprintf("s%d", i)], now)
			if allowed != (err == nil) {
				t.Errorf("%s: mark notice %d read = %v, allowed %v", name, i+1, err, allowed)
			}
		}
		if err := db.ExecForTest(ctx, `UPDATE notifications SET read_at = ''`); err != nil {
			t.Fatal(err)
		}
	}
}
