package workflow

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var (
	excNow   = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	excConn  = Conn{ID: 7, Team: "red", State: StateActive, CurrentVersion: 2, ApprovedVersion: 2}
	excFacts = ExceptionFacts{Owner: "Boss@Example.test", Allowed: []string{"training"}, Known: []string{"inference", "training", "experiment"}}
	excAdmin = NewPrincipal(1, "a", "admin@example.test", "Admin", []Role{RoleAdmin}, nil)
	excOwner = NewPrincipal(2, "b", "boss@example.test", "Boss", nil, nil)
	excReq   = ExceptionRequest{PriorityClass: "inference", Days: 3, Reason: "demo for the board"}
)

func inputField(err error) string {
	var ie *ExceptionInputError
	if errors.As(err, &ie) {
		return ie.Field
	}
	return ""
}

// TestExceptionWho: the exception owner (email compared without case) and
// admins grant; nobody of the team does, an admin of the team included;
// anyone else is refused.
func TestExceptionWho(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Principal
		want error
	}{
		{"admin outside the team", excAdmin, nil},
		{"exception owner, other case", excOwner, nil},
		{"admin who is a member of the team", NewPrincipal(3, "c", "adm2@example.test", "", []Role{RoleAdmin}, []Membership{{"red", TeamMember}}), ErrExceptionOwnTeam},
		{"exception owner who owns the team", NewPrincipal(4, "d", "boss@example.test", "", nil, []Membership{{"red", TeamOwner}}), ErrExceptionOwnTeam},
		{"reviewer, not the owner", NewPrincipal(5, "e", "rev@example.test", "", []Role{RoleReviewer}, nil), ErrExceptionNotOwner},
		{"member of another team", NewPrincipal(6, "f", "x@example.test", "", nil, []Membership{{"blue", TeamOwner}}), ErrExceptionNotOwner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := GrantException(excConn, tc.p, excReq, excFacts, false, excNow)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("grant = %v, want %v", err, tc.want)
			}
			x := Exception{ID: 1, ConnectionID: excConn.ID, PriorityClass: "inference", State: ExceptionActive, End: excNow.Add(time.Hour)}
			_, err = RevokeException(excConn, tc.p, x, excFacts.Owner, "no longer needed", false, excNow)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("revoke = %v, want %v", err, tc.want)
			}
		})
	}
	// No owner named: only an admin.
	f := excFacts
	f.Owner = ""
	if _, _, err := GrantException(excConn, NewPrincipal(9, "z", "", "", nil, nil), excReq, f, false, excNow); !errors.Is(err, ErrExceptionNotOwner) {
		t.Fatalf("no owner, no email = %v", err)
	}
}

// TestExceptionGrantRules: a live approved connection, a reason, a class the
// cluster knows and the contract does not allow, none open of that class,
// and 1 to MaxDays days (14 by default).
func TestExceptionGrantRules(t *testing.T) {
	with := func(f func(*ExceptionRequest, *ExceptionFacts, *Conn)) (Exception, Effect, error) {
		r, fa, c := excReq, excFacts, excConn
		f(&r, &fa, &c)
		return GrantException(c, excAdmin, r, fa, false, excNow)
	}
	for _, tc := range []struct {
		name  string
		f     func(*ExceptionRequest, *ExceptionFacts, *Conn)
		field string
		err   error
	}{
		{"not live", func(_ *ExceptionRequest, _ *ExceptionFacts, c *Conn) { c.State = StateRevoked }, "", ErrExceptionNotLive},
		{"never approved", func(_ *ExceptionRequest, _ *ExceptionFacts, c *Conn) { c.ApprovedVersion = 0 }, "", ErrExceptionNotLive},
		{"no reason", func(r *ExceptionRequest, _ *ExceptionFacts, _ *Conn) { r.Reason = "  " }, "reason", nil},
		{"unknown class", func(r *ExceptionRequest, _ *ExceptionFacts, _ *Conn) { r.PriorityClass = "vip" }, "priority_class", nil},
		{"class already allowed", func(r *ExceptionRequest, _ *ExceptionFacts, _ *Conn) { r.PriorityClass = "training" }, "priority_class", nil},
		{"zero days", func(r *ExceptionRequest, _ *ExceptionFacts, _ *Conn) { r.Days = 0 }, "days", nil},
		{"over the default maximum", func(r *ExceptionRequest, _ *ExceptionFacts, _ *Conn) { r.Days = DefaultExceptionMaxDays + 1 }, "days", nil},
		{"over the cluster's maximum", func(r *ExceptionRequest, f *ExceptionFacts, _ *Conn) { r.Days, f.MaxDays = 4, 3 }, "days", nil},
		{"one of the class is open", func(_ *ExceptionRequest, f *ExceptionFacts, _ *Conn) {
			f.Open = []Exception{{ID: 4, PriorityClass: "inference", State: ExceptionReverting}}
		}, "priority_class", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := with(tc.f)
			if err == nil {
				t.Fatal("granted")
			}
			if got := inputField(err); got != tc.field {
				t.Fatalf("field = %q (%v), want %q", got, err, tc.field)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
	// The limits themselves are allowed.
	for _, tc := range []struct{ days, max int }{{1, 0}, {DefaultExceptionMaxDays, 0}, {30, 30}} {
		if _, _, err := with(func(r *ExceptionRequest, f *ExceptionFacts, _ *Conn) { r.Days, f.MaxDays = tc.days, tc.max }); err != nil {
			t.Errorf("%d days (max %d): %v", tc.days, tc.max, err)
		}
	}
	if _, _, err := GrantException(excConn, excAdmin, excReq, excFacts, false, time.Time{}); !errors.Is(err, ErrNoClock) {
		t.Errorf("no clock = %v", err)
	}
}

// TestExceptionGrantEffect: the exception runs from now for days×24h, is
// active, audited and told; its reapply job is queued unless one is open.
func TestExceptionGrantEffect(t *testing.T) {
	x, e, err := GrantException(excConn, excOwner, excReq, excFacts, false, excNow)
	if err != nil {
		t.Fatal(err)
	}
	if !x.Start.Equal(excNow) || !x.End.Equal(excNow.Add(72*time.Hour)) || x.State != ExceptionActive || !x.InEffect() ||
		x.GrantedBy != "boss@example.test" || x.GrantedByID != 2 || x.Reason != "demo for the board" || x.ConnectionID != 7 || x.Team != "red" {
		t.Fatalf("exception = %+v", x)
	}
	if e.Job == nil || e.Job.Kind != JobReapply || e.Job.Version != 2 || e.Writes(excConn.State) {
		t.Fatalf("effect job = %+v, writes %v", e.Job, e.Writes(excConn.State))
	}
	if len(e.Audit) != 1 || e.Audit[0].Action != "exception.grant" || !e.Audit[0].JobRef || len(e.Notify) != 2 {
		t.Fatalf("audit %+v, notices %+v", e.Audit, e.Notify)
	}
	_, e, _ = GrantException(excConn, excOwner, excReq, excFacts, true, excNow)
	if e.Job != nil || e.Audit[0].JobRef {
		t.Fatalf("with a reapply job open: job %+v", e.Job)
	}
}

// TestExceptionRevokeAndExpire: an early revocation needs a reason and an
// active exception; the expiry is due at the end, not before, queues the
// revert's job (unless one is open) and on a connection no longer live
// only audits.
func TestExceptionRevokeAndExpire(t *testing.T) {
	x := Exception{ID: 3, ConnectionID: 7, PriorityClass: "inference", State: ExceptionActive, Start: excNow, End: excNow.Add(24 * time.Hour)}
	if _, err := RevokeException(excConn, excAdmin, x, "", " ", false, excNow); inputField(err) != "reason" {
		t.Errorf("no reason = %v", err)
	}
	ended := x
	ended.State = ExceptionReverting
	if _, err := RevokeException(excConn, excAdmin, ended, "", "why", false, excNow); !errors.Is(err, ErrExceptionEnded) {
		t.Errorf("ended = %v", err)
	}
	e, err := RevokeException(excConn, excAdmin, x, "", "why", false, excNow)
	if err != nil || e.Job == nil || e.Job.Kind != JobReapply || e.Audit[0].Action != "exception.revoke" {
		t.Fatalf("revoke = %+v, %v", e, err)
	}

	if _, due, err := ExpireException(excConn, x, false, x.End.Add(-time.Nanosecond)); due || err != nil {
		t.Errorf("before the end: due %v, %v", due, err)
	}
	e, due, err := ExpireException(excConn, x, false, x.End)
	if !due || err != nil || e.Job == nil || e.Job.Kind != JobReapply || e.Audit[0].Action != "exception.expire" || e.By != Provisioner {
		t.Fatalf("at the end: due %v, %+v, %v", due, e, err)
	}
	if e, due, _ := ExpireException(excConn, x, true, x.End); !due || e.Job != nil {
		t.Errorf("with a reapply job open: job %+v", e.Job)
	}
	if _, due, _ := ExpireException(excConn, ended, false, x.End); due {
		t.Error("a reverting exception expired again")
	}
	gone := excConn
	gone.State = StateRevoked
	if e, due, _ := ExpireException(gone, x, false, x.End); !due || e.Job != nil || len(e.Audit) != 1 {
		t.Errorf("revoked connection: due %v, %+v", due, e)
	}
	if _, err := ExceptionRequeue(gone, x, "x"); err == nil {
		t.Error("requeued on a revoked connection")
	}
}

// TestExceptionJobDone: a grant's job is audited as applied, a revert's as
// reverted.
func TestExceptionJobDone(t *testing.T) {
	x := Exception{ID: 3, PriorityClass: "inference", State: ExceptionActive}
	if a := ExceptionJobDone(excConn, x, 9).Audit[0].Action; a != "exception.applied" {
		t.Errorf("active: %s", a)
	}
	x.State = ExceptionReverting
	if a := ExceptionJobDone(excConn, x, 9).Audit[0].Action; a != "exception.reverted" {
		t.Errorf("reverting: %s", a)
	}
	if a := ExceptionClosed(excConn, x).Audit[0].Action; a != "exception.reverted" {
		t.Errorf("closed: %s", a)
	}
}

// TestExceptionClasses: the grant form offers the cluster's classes the
// contract does not allow, in the cluster's order, and none when it allows
// them all.
func TestExceptionClasses(t *testing.T) {
	known := []string{"inference", "training", "experiment"}
	if got := ExceptionClasses(known, []string{"training"}); !slices.Equal(got, []string{"inference", "experiment"}) {
		t.Errorf("ExceptionClasses = %v", got)
	}
	if got := ExceptionClasses(known, known); len(got) != 0 {
		t.Errorf("all allowed: %v", got)
	}
}

// TestExceptionOwnerViewsTheConnection: the exception owner named by the
// approved contract views that connection (to read the contract it decides
// exceptions from), compared without case, though outside the team; not
// its team's other views, and nobody else by being named nowhere.
func TestExceptionOwnerViewsTheConnection(t *testing.T) {
	blueOwner := NewPrincipal(2, "b", "Boss@example.test", "Boss", nil, []Membership{{"blue", TeamOwner}})
	o := Object{Team: "red", State: StateActive, ExceptionOwner: "boss@Example.test "}
	if d := Decide(blueOwner, ActionViewConnection, o); !d.Allowed {
		t.Errorf("the named exception owner: %s", d.Reason)
	}
	if d := Decide(blueOwner, ActionViewTeam, o); d.Allowed {
		t.Errorf("the exception owner views the team: %s", d.Reason)
	}
	for _, other := range []Object{{Team: "red", State: StateActive}, {Team: "red", State: StateActive, ExceptionOwner: "someone@example.test"}, {State: StateActive, ExceptionOwner: "boss@example.test"}} {
		if d := Decide(blueOwner, ActionViewConnection, other); d.Allowed {
			t.Errorf("%+v: allowed (%s)", other, d.Reason)
		}
	}
	noEmail := NewPrincipal(3, "c", "", "", nil, []Membership{{"blue", TeamOwner}})
	if d := Decide(noEmail, ActionViewConnection, Object{Team: "red", State: StateActive, ExceptionOwner: " "}); d.Allowed {
		t.Errorf("an empty owner names someone without an email: %s", d.Reason)
	}
}
