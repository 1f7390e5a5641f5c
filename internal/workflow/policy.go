package workflow

import (
	"fmt"
	"slices"
)

// Action is something a principal may try to do.
type Action string

// The actions the portal knows so far. Later features add theirs here, each
// with its rule in Decide and its rows in the policy table test.
const (
	ActionViewTeam        Action = "team.view"    // a team's home: its connections, usage, snippets
	ActionViewAdminHome   Action = "admin.view"   // the admin queue and cluster overview
	ActionViewReviewHome  Action = "review.view"  // the reviewer's worklist
	ActionViewFinanceHome Action = "finance.view" // usage, cost and chargeback
	ActionViewAudit       Action = "audit.view"   // the portal-wide audit trail

	// Connection requests and connections. A connection's own history
	// (versions, diffs, approvals, its audit events) is part of viewing it.
	ActionCreateRequest   Action = "request.create"          // file a new connection request
	ActionEditRequest     Action = "request.edit"            // save a new version of a request
	ActionSubmitRequest   Action = "request.submit"          // send a request to the admins
	ActionWithdrawRequest Action = "request.withdraw"        // take a request back before approval
	ActionViewConnection  Action = "connection.view"         // a request or connection and its history
	ActionApprove         Action = "request.approve"         // approve a submitted version
	ActionReject          Action = "request.reject"          // reject a submitted request
	ActionRequestChanges  Action = "request.request_changes" // send a submitted request back
	ActionRevoke          Action = "connection.revoke"       // remove a connection's access
	ActionReview          Action = "connection.review"       // start and decide lifecycle reviews
	ActionViewCosts       Action = "costs.view"              // usage and cost, portal-wide or of a team
	ActionEditCostPolicy  Action = "costs.policy"            // choose the shared-cost policy (how idle capacity and overhead are split)
	ActionEditInventory   Action = "inventory.edit"          // the cluster's instance inventory
	ActionReapply         Action = "connection.reapply"      // re-apply the approved plan to fix drift
	ActionRetryJob        Action = "connection.retry"        // queue provisioning or revocation again after a failure
	ActionEditScheduler   Action = "cluster.scheduler"       // reconcile the cluster's task-governance scheduler config
	ActionViewPlan        Action = "connection.plan"         // a connection's provisioning plan, on its page
	ActionViewFullErrors  Action = "errors.view_full"        // job and AWS errors unreduced (they may name accounts and ARNs)
	ActionViewSignals     Action = "signals.view"            // watched signals: a team's, or (no team) every team's and the cluster's
	ActionAckSignal       Action = "signal.acknowledge"      // acknowledge a fired signal with a note
	ActionViewUsage       Action = "usage.view"              // a team's usage page: allocation, hours, tasks, quota suggestion
	ActionConfirmHold     Action = "connection.hold"         // confirm or decline a proposed hold, escalate a hold to hold-and-drain
	ActionReleaseHold     Action = "connection.release_hold" // release a confirmed hold
	ActionRetryHold       Action = "connection.retry_hold"   // queue a failed hold job again
	ActionExportEvidence  Action = "connection.evidence"     // a connection's evidence bundle (JSON and printable page)
	ActionReadNotice      Action = "notice.read"             // one of the user's own in-app notices, about a team (or none)
	ActionMarkNoticeRead  Action = "notice.mark_read"        // mark one of the user's own in-app notices read
	// Lifecycle reviews (issue 13).
	ActionViewReview        Action = "review.read"               // one review: its frozen evidence and its decision
	ActionDeclineRevocation Action = "review.decline_revocation" // decline a review's recommendation of revocation: the connection stays
)

// Object is what an action applies to. Team is empty for portal-wide objects.
// The other fields describe a connection request and matter only to the
// actions on one.
type Object struct {
	Team string
	// Personal: a notice addressed to its reader by name (ToPerson), such
	// as a signal's owner, who may be outside the team (ActionReadNotice).
	Personal bool
	State    State
	// Amendment is where the change request of a live connection is.
	Amendment Amendment
	// RequesterID is the user who filed the request.
	RequesterID int64
	// EditorIDs are all users who saved any version of the contract.
	EditorIDs []int64
	// SubmitterIDs are all users who submitted any version of the request.
	SubmitterIDs []int64
	// ApproverIDs are the admins who already approved the current version.
	ApproverIDs        []int64
	DataClassification DataClassification
	// ApprovedDataClassification, while a live connection's change is
	// open, is its running (approved) version's: the change's approvals
	// need what either needs (ChangeApprovalsNeeded).
	ApprovedDataClassification DataClassification
	// Hold is where a live connection's hold is (hold.go).
	Hold Hold
	// ExceptionOwner is the exception owner its approved contract names
	// ("" before an approval, or when the caller did not load it): that
	// person views the connection to decide its exceptions
	// (ActionViewConnection; exception.go).
	ExceptionOwner string
}

// ApprovalsNeededFor is how many distinct admins must approve what o waits
// for: its version, or a live connection's change.
func ApprovalsNeededFor(o Object) int {
	if o.State.Live() && o.Amendment.Open() {
		return ChangeApprovalsNeeded(o.ApprovedDataClassification, o.DataClassification)
	}
	return ApprovalsNeeded(o.DataClassification)
}

// ApprovalComplete reports whether o's current version already has every
// approval it needs: an approval of it can only be a loser of a race.
func ApprovalComplete(o Object) bool {
	return len(o.ApproverIDs) >= ApprovalsNeededFor(o)
}

// LostApprovalRace reports whether p's approval of version, which the
// page showed and which is still the current one (current), can only have
// lost a race: p is an admin and that version already has every approval
// it needs (issue 32 item 8). The caller says so (409, naming the winner)
// instead of Decide's refusal of an approved connection; Approve decides
// the same inside the store's transaction for the races that pass this.
func LostApprovalRace(p Principal, o Object, version, current int) bool {
	return p.HasRole(RoleAdmin) && version == current && ApprovalComplete(o)
}

// ApprovalsNeeded is how many distinct admins must approve a contract
// version: two for restricted data, one otherwise.
func ApprovalsNeeded(dc DataClassification) int {
	if dc == DataRestricted {
		return 2
	}
	return 1
}

// Decision is the outcome of Decide. Reason always says why, for logs and
// for pages that explain a refusal.
type Decision struct {
	Allowed bool
	Reason  string
}

func allow(format string, a ...any) Decision { return Decision{true, fmt.Sprintf(format, a...)} }
func deny(format string, a ...any) Decision  { return Decision{false, fmt.Sprintf(format, a...)} }

// Decide is the portal's authorization policy: a pure function of the actor,
// the action and the object. Handlers call it for every request and refuse
// (as not found, for team objects) when it denies.
func Decide(p Principal, a Action, o Object) Decision {
	if !p.HasAccess() {
		return deny("%s is in no group mapped to the portal", p.DisplayName())
	}
	switch a {
	case ActionViewTeam:
		return viewTeam(p, o)
	case ActionViewConnection:
		return viewConnection(p, o)
	case ActionReadNotice, ActionMarkNoticeRead:
		// One marks read what one may read (the query is keyed by the user).
		return decideReadNotice(p, o)
	case ActionCreateRequest:
		return requireTeamOwner(p, o)
	case ActionEditRequest:
		return ownerInState(p, o, EventEdit)
	case ActionSubmitRequest:
		return ownerInState(p, o, EventSubmit)
	case ActionWithdrawRequest:
		return ownerInState(p, o, EventWithdraw)
	case ActionApprove:
		return decideApproval(p, o)
	case ActionReject:
		return adminDecision(p, o, EventReject)
	case ActionRequestChanges:
		return adminDecision(p, o, EventRequestChanges)
	case ActionRetryJob:
		return decideRetryJob(p, o)
	case ActionReapply:
		return decideReapply(p, o)
	case ActionRevoke:
		return decideRevoke(p, o)
	case ActionReview:
		return decideReview(p, o)
	case ActionViewReview:
		return decideViewReview(p, o)
	case ActionDeclineRevocation:
		return decideDeclineRevocation(p, o)
	case ActionViewCosts:
		return decideViewCosts(p, o)
	case ActionViewUsage:
		return decideViewUsage(p, o)
	case ActionExportEvidence:
		return decideExportEvidence(p, o)
	case ActionEditInventory, ActionEditScheduler, ActionViewFullErrors:
		return requireRole(p, RoleAdmin)
	case ActionViewPlan:
		return decideViewPlan(p, o)
	case ActionViewSignals:
		return decideViewSignals(p, o)
	case ActionAckSignal:
		return decideAckSignal(p, o)
	case ActionConfirmHold:
		return holdAction(p, o, HoldStepConfirm, HoldStepDrain, HoldStepDecline)
	case ActionReleaseHold:
		return holdAction(p, o, HoldStepRelease)
	case ActionRetryHold:
		return decideRetryHold(p, o)
	case ActionViewAdminHome:
		return requireRole(p, RoleAdmin)
	case ActionViewReviewHome:
		return requireRole(p, RoleReviewer)
	case ActionViewFinanceHome:
		return requireRole(p, RoleFinance)
	case ActionEditCostPolicy:
		// Finance alone decides who pays for idle capacity and overhead.
		return requireRole(p, RoleFinance)
	case ActionViewAudit:
		return decideViewAudit(p, o)
	}
	return deny("unknown action %q", a)
}

// decideReadNotice is Decide for ActionReadNotice.
// A notice delivered to someone who has since left the team (or
// lost the role it was sent for) carries what its connection's
// page does (reasons, holds, review texts): it is read under the
// same rule as that page, with the roles confirmed now (issue 32
// item 1). A notice about no team is its recipient's, and so is one
// addressed to them by name: the contract named them (a signal's owner,
// who may be finance or another team's engineer).
func decideReadNotice(p Principal, o Object) Decision {
	if o.Team == "" {
		return allow("a notice about no team")
	}
	if o.Personal && p.HasAccess() {
		return allow("a notice addressed to its reader")
	}
	return viewTeam(p, o)
}

// decideRetryJob is Decide for ActionRetryJob.
// Trying again carries out a decision already taken (an approval or
// a revocation), so any admin may, in the state that decision left.
func decideRetryJob(p Principal, o Object) Decision {
	if d := requireRole(p, RoleAdmin); !d.Allowed {
		return d
	}
	if o.State.Live() && o.Amendment == AmendFailed {
		return allow("admin, a change that failed to apply")
	}
	if o.State != StateApproved && o.State != StateRevoking {
		return deny("only an approved connection (provisioning), a revoking one or a change that failed to apply can be retried, not %s", statePhrases[o.State])
	}
	return allow("admin, %s", o.State)
}

// decideReapply is Decide for ActionReapply.
// Re-applying restores what an admin already approved; it grants
// nothing new, so any admin may do it on a live connection.
func decideReapply(p Principal, o Object) Decision {
	if d := requireRole(p, RoleAdmin); !d.Allowed {
		return d
	}
	if !o.State.Live() {
		return deny("only a live (active or under review) connection can be re-applied, not %s", statePhrases[o.State])
	}
	return allow("admin, live connection")
}

// decideRevoke is Decide for ActionRevoke.
// Revocation makes things safer, so any admin may do it, even on
// their own team's connection.
func decideRevoke(p Principal, o Object) Decision {
	if d := requireRole(p, RoleAdmin); !d.Allowed {
		return d
	}
	if o.Team == "" {
		return deny("no team given")
	}
	return inState(o, EventRevoke, "admin")
}

// decideReview is Decide for ActionReview.
func decideReview(p Principal, o Object) Decision {
	if d := independentOnTeam(p, o, RoleReviewer, "reviews"); !d.Allowed {
		return d
	}
	// A reviewer who belongs to the team (an admin who owns it, say)
	// reviews neither its connections nor their own.
	if r, ok := p.TeamRole(o.Team); ok {
		return deny("%s is %s of team %s; nobody reviews their own team's connection", p.DisplayName(), r, o.Team)
	}
	if !allows(o.State, EventStartReview) && !allows(o.State, EventRenew) {
		return deny("%s cannot be reviewed", stateName(o.State))
	}
	return allow("reviewer")
}

// decideViewReview is Decide for ActionViewReview.
// A review is oversight: reviewers and admins read every team's;
// a team's owners read their own team's reviews (they answer for
// the connection and act on the decision). Members, finance and
// other teams' owners do not (404).
func decideViewReview(p Principal, o Object) Decision {
	if o.Team == "" {
		return deny("no team given")
	}
	for _, r := range []Role{RoleReviewer, RoleAdmin} {
		if p.HasRole(r) {
			return allow("%s", r)
		}
	}
	if r, ok := p.TeamRole(o.Team); ok && r == TeamOwner {
		return allow("owner of team %s", o.Team)
	}
	return deny("reviews are read by reviewers, admins and the team's owners")
}

// decideDeclineRevocation is Decide for ActionDeclineRevocation.
// Declining a reviewer's recommendation keeps the connection
// running: an admin independent of the request and outside the
// team decides it (nobody keeps their own connection alive), while
// the connection waits under review.
func decideDeclineRevocation(p Principal, o Object) Decision {
	if d := independentOnTeam(p, o, RoleAdmin, "decides on"); !d.Allowed {
		return d
	}
	if r, ok := p.TeamRole(o.Team); ok {
		return deny("%s is %s of team %s; nobody declines a recommendation to revoke their own team's connection", p.DisplayName(), r, o.Team)
	}
	if o.State != StateUnderReview {
		return deny("%s has no recommendation of revocation waiting", stateName(o.State))
	}
	return allow("admin")
}

// decideViewCosts is Decide for ActionViewCosts.
// Finance reads every team's costs; a team's owners read theirs.
// Members and oversight roles see usage on the team page, not money.
func decideViewCosts(p Principal, o Object) Decision {
	if p.HasRole(RoleFinance) {
		return allow("finance")
	}
	if r, ok := p.TeamRole(o.Team); ok && o.Team != "" && r == TeamOwner {
		return allow("owner of team %s", o.Team)
	}
	return deny("needs the %s role or ownership of the team", RoleFinance)
}

// decideViewUsage is Decide for ActionViewUsage.
// A team's owners and members see their usage; finance reads every
// team's (chargeback), admins oversee capacity, and reviewers cite
// usage as evidence in lifecycle reviews (is the guarantee used?).
// Another team's owner or member does not (404).
func decideViewUsage(p Principal, o Object) Decision {
	if o.Team == "" {
		return deny("no team given")
	}
	if r, ok := p.TeamRole(o.Team); ok {
		return allow("%s of team %s", r, o.Team)
	}
	for _, r := range []Role{RoleAdmin, RoleReviewer, RoleFinance} {
		if p.HasRole(r) {
			return allow("%s", r)
		}
	}
	return deny("not a member of team %s", o.Team)
}

// decideExportEvidence is Decide for ActionExportEvidence.
// The bundle is oversight's record of a connection: admins and
// reviewers export any; a team's owners export their own
// connection's, which they answer for. Members read the
// connection's page but do not take its whole record away, and
// another team's owner does not see it exists (404).
func decideExportEvidence(p Principal, o Object) Decision {
	if o.Team == "" {
		return deny("no team given")
	}
	for _, r := range []Role{RoleAdmin, RoleReviewer} {
		if p.HasRole(r) {
			return allow("%s", r)
		}
	}
	return requireTeamOwner(p, o)
}

// decideViewPlan is Decide for ActionViewPlan.
// Admins read every plan; a team's owners read their request's
// while they shape it or wait for the decision.
func decideViewPlan(p Principal, o Object) Decision {
	if p.HasRole(RoleAdmin) {
		return allow("admin")
	}
	if d := ownerInState(p, o, EventEdit); d.Allowed {
		return d
	}
	if waitsForAdmin(o) {
		return ownerInState(p, o, EventWithdraw)
	}
	return deny("the plan is shown to admins, and to the team's owners while they edit or wait for a decision")
}

// decideViewSignals is Decide for ActionViewSignals.
// A team's signals are part of its page; every team's and the
// cluster's together are the admins' overview.
func decideViewSignals(p Principal, o Object) Decision {
	if o.Team == "" {
		return requireRole(p, RoleAdmin)
	}
	return viewTeam(p, o)
}

// decideAckSignal is Decide for ActionAckSignal.
// Acknowledging says "we saw it and this is what we do": the
// team's owners answer for their team's signals, admins for every
// team's and for the cluster's. Members and oversight roles read.
func decideAckSignal(p Principal, o Object) Decision {
	if p.HasRole(RoleAdmin) {
		return allow("admin")
	}
	if o.Team == "" {
		return deny("the cluster's signals are acknowledged by admins")
	}
	return requireTeamOwner(p, o)
}

// decideRetryHold is Decide for ActionRetryHold.
// Trying a failed hold job again carries out a step already
// decided (the queue's stopPolicy as the hold says now), so any
// admin may, on a live connection, as with ActionRetryJob.
func decideRetryHold(p Principal, o Object) Decision {
	if d := requireRole(p, RoleAdmin); !d.Allowed {
		return d
	}
	if o.Team == "" {
		return deny("no team given")
	}
	if !o.State.Live() {
		return deny("%s has no hold job to try again", stateName(o.State))
	}
	return allow("admin, live connection")
}

// decideViewAudit is Decide for ActionViewAudit.
// The trail is oversight: admins answer for changes, reviewers cite
// it as evidence.
func decideViewAudit(p Principal, o Object) Decision {
	for _, r := range []Role{RoleAdmin, RoleReviewer} {
		if p.HasRole(r) {
			return allow("%s", r)
		}
	}
	return deny("needs the %s or %s role", RoleAdmin, RoleReviewer)
}

func requireRole(p Principal, r Role) Decision {
	if p.HasRole(r) {
		return allow("%s", r)
	}
	return deny("needs the %s role", r)
}

// viewTeam: a team's members and owners see it; admins and reviewers oversee
// every team; finance reads costs, not team pages.
func viewTeam(p Principal, o Object) Decision {
	if o.Team == "" {
		return deny("no team given")
	}
	if r, ok := p.TeamRole(o.Team); ok {
		return allow("%s of team %s", r, o.Team)
	}
	if SeesAllTeams(p) {
		return allow("%s: oversees every team", p.Roles)
	}
	return deny("not a member of team %s", o.Team)
}

// viewConnection: the team's members, admins and reviewers (viewTeam),
// and the person the approved contract names as its exception owner, who
// may be outside the team and must read the contract to decide an
// exception (they see the connection, not the rest of the team's).
func viewConnection(p Principal, o Object) Decision {
	d := viewTeam(p, o)
	if !d.Allowed && o.Team != "" && namesPerson(o.ExceptionOwner, p) {
		return allow("%s is the exception owner the approved contract of team %s names", p.Email, o.Team)
	}
	return d
}

// SeesAllTeams reports whether p may view every team's connections (admins
// and reviewers); everyone else sees only their own teams'. Lists use it
// to scope their queries the same way Decide scopes single objects.
func SeesAllTeams(p Principal) bool {
	return p.HasAccess() && (p.HasRole(RoleAdmin) || p.HasRole(RoleReviewer))
}

// SeesAllExceptions reports whether p's exceptions page lists every
// connection with an exception in effect (admins, who answer for the
// cluster's priority classes); everyone else's lists the live connections
// whose approved contracts name them as exception owner.
func SeesAllExceptions(p Principal) bool {
	return p.HasAccess() && p.HasRole(RoleAdmin)
}

// requireTeamOwner: owners act on their own team's requests only. Admin is
// no substitute: an admin files requests as the owner of a team, and then
// cannot approve them.
func requireTeamOwner(p Principal, o Object) Decision {
	if o.Team == "" {
		return deny("no team given")
	}
	if r, ok := p.TeamRole(o.Team); ok && r == TeamOwner {
		return allow("owner of team %s", o.Team)
	}
	return deny("not an owner of team %s", o.Team)
}

// ownerInState: an owner's action on their request, when its state allows
// the matching event.
func ownerInState(p Principal, o Object, e Event) Decision {
	if d := requireTeamOwner(p, o); !d.Allowed {
		return d
	}
	return inState(o, e, "owner of team "+o.Team)
}

func inState(o Object, e Event, who string) Decision {
	if !allowsOn(o.State, o.Amendment, e) {
		if o.State.Live() && slices.Contains(amendEvents, e) {
			return deny("%s", (&AmendmentError{From: o.Amendment, Event: e}).Error())
		}
		return deny("%s cannot be %s", stateName(o.State), eventPhrases[e])
	}
	return allow("%s", who)
}

func stateName(s State) string {
	if p, ok := statePhrases[s]; ok {
		return p
	}
	return fmt.Sprintf("a connection in unknown state %q", s)
}

// independent: nobody approves a request they filed or submitted or a
// contract they edited, and nobody reviews one either.
func independent(p Principal, o Object, verb string) Decision {
	if p.UserID == o.RequesterID {
		return deny("%s filed this request; nobody %s a request they filed or a contract they edited", p.DisplayName(), verb)
	}
	if slices.Contains(o.EditorIDs, p.UserID) {
		return deny("%s edited this contract; nobody %s a request they filed or a contract they edited", p.DisplayName(), verb)
	}
	if slices.Contains(o.SubmitterIDs, p.UserID) {
		return deny("%s submitted this request; nobody %s a request they filed, submitted or edited", p.DisplayName(), verb)
	}
	return allow("independent of the request")
}

// adminDecision: reject and request changes, by an admin independent of
// the request, while it is submitted.
func adminDecision(p Principal, o Object, e Event) Decision {
	if d := independentOnTeam(p, o, RoleAdmin, "decides on"); !d.Allowed {
		return d
	}
	// Only a submitted request (or change) waits for an admin; a
	// connection under review is the reviewer's to send back.
	if !waitsForAdmin(o) {
		return deny("%s cannot be %s", stateName(o.State), eventPhrases[e])
	}
	return allow("admin")
}

// independentOnTeam is the first rule of a decision on a team's
// connection: p has role r, o names a team, and p is independent of o's
// request (verb: what p does to it).
func independentOnTeam(p Principal, o Object, r Role, verb string) Decision {
	if d := requireRole(p, r); !d.Allowed {
		return d
	}
	if o.Team == "" {
		return deny("no team given")
	}
	return independent(p, o, verb)
}

// decideApproval: approve as adminDecision, and each admin approves a
// version once, so a restricted contract's two approvals come from two
// people.
func decideApproval(p Principal, o Object) Decision {
	if d := independentOnTeam(p, o, RoleAdmin, "approves"); !d.Allowed {
		return d
	}
	if !waitsForAdmin(o) {
		return deny("%s cannot be approved", stateName(o.State))
	}
	need := ApprovalsNeededFor(o)
	if slices.Contains(o.ApproverIDs, p.UserID) {
		return deny("%s already approved this version; the next approval must come from another admin", p.DisplayName())
	}
	if len(o.ApproverIDs) >= need {
		return deny("this version already has its %d approvals", need)
	}
	return allow("admin; approval %d of %d", len(o.ApproverIDs)+1, need)
}

// waitsForAdmin: a submitted request, or a live connection's submitted
// change.
func waitsForAdmin(o Object) bool {
	return o.State == StateSubmitted || o.State.Live() && o.Amendment == AmendSubmitted
}

// holdAction: an admin's hold step (hold.go). Admins decide, but not on a
// connection of a team they own, nor one they filed, edited or submitted:
// the independence of approvals, as a hold (and its release) decides what
// the team may run. The connection must be live and its hold in a state one
// of the steps starts from.
func holdAction(p Principal, o Object, steps ...HoldStep) Decision {
	if d := requireRole(p, RoleAdmin); !d.Allowed {
		return d
	}
	if o.Team == "" {
		return deny("no team given")
	}
	if r, ok := p.TeamRole(o.Team); ok && r == TeamOwner {
		return deny("%s owns team %s; nobody decides a hold of their own team's connection", p.DisplayName(), o.Team)
	}
	if d := independent(p, o, "decides a hold of"); !d.Allowed {
		return d
	}
	if !o.State.Live() {
		return deny("%s cannot be held", stateName(o.State))
	}
	for _, st := range steps {
		if HoldAllows(o.Hold, st) {
			return allow("admin, independent; %s", o.Hold.Label())
		}
	}
	return deny("the connection has %s", o.Hold.Label())
}

// NoticeScope is which of a user's own in-app notices they may read now
// (ActionReadNotice), for queries: notices about no team always; about a
// team, when they may view that team (every team when AllTeams). Lists,
// the unread count and marking read apply it in SQL, so that a notice the
// reader may no longer see is neither listed, counted nor marked.
type NoticeScope struct {
	None     bool // no access at all: nothing
	AllTeams bool
	Teams    []string
	// Within, when not empty, keeps only notices about no team or about
	// these teams, even those addressed to the reader by name: a token
	// limited to teams (TokenNoticeScope, TokenCoversTeam).
	Within []string
}

// NoticeScopeOf is p's NoticeScope.
func NoticeScopeOf(p Principal) NoticeScope {
	if !p.HasAccess() {
		return NoticeScope{None: true}
	}
	if SeesAllTeams(p) {
		return NoticeScope{AllTeams: true}
	}
	var s NoticeScope
	for _, m := range p.Memberships {
		if !slices.Contains(s.Teams, m.Team) {
			s.Teams = append(s.Teams, m.Team)
		}
	}
	return s
}
