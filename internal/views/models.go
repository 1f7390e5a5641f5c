package views

// Page carries what the layout needs on every page.
type Page struct {
	Title     string
	User      *User // nil when nobody is signed in
	Nav       []NavItem
	CSRFToken string
	// DevIdP is true when the built-in development identity provider is in
	// use: every page then shows a banner saying so.
	DevIdP  bool
	Version string
	Flash   string
}

// User is the signed-in person as shown in the header and on the home page.
type User struct {
	Name        string
	Email       string
	Roles       []string
	Memberships []Membership
}

// Membership is one team the user belongs to.
type Membership struct {
	Team string
	Role string // "owner" or "member"
	Href string
}

// NavItem is one navigation link.
type NavItem struct {
	Label  string
	Href   string
	TestID string
	Active bool
}

// Landing is the signed-out front page.
type Landing struct {
	SignedOut bool // just signed out: say so
}

// Home is the signed-in front page: one card per role the user holds.
type Home struct {
	Cards []HomeCard
}

// HomeCard points to the home page of one role or team.
type HomeCard struct {
	Title  string
	Body   string
	Href   string
	Action string
	TestID string
}

// RoleHome is the empty-state home page of one role (team owner or member,
// admin, reviewer, finance): what will appear here and what to do now.
type RoleHome struct {
	Heading    string
	Lead       string
	EmptyTitle string
	EmptyBody  string
	Next       []string // what the user can do or expect next
	TestID     string
}

// ErrorPage is shown for every error the user sees.
type ErrorPage struct {
	Status    int
	Title     string
	Message   string
	Detail    []string // optional extra lines, e.g. the groups we saw
	RequestID string
	Action    string // link label, e.g. "Try signing in again"
	ActionURL string
}
