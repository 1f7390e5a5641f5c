package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestHomePageShowsIdentityAndEscapes(t *testing.T) {
	p := Page{
		Title: "Home", DevIdP: true, Version: "v1", CSRFToken: "tok",
		User: &User{Name: `<script>alert(1)</script>`, Email: "a@example.test", Roles: []string{"admin"},
			Memberships: []Membership{{Team: "red", Role: "owner", Href: "/teams/red"}}},
		Nav: []NavItem{{Label: "Home", Href: "/", TestID: "nav-home", Active: true}},
	}
	var buf bytes.Buffer
	if err := HomePage(p, Home{Cards: []HomeCard{{Title: "Team red", Href: "/teams/red", TestID: "card-team-red"}}}).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{
		`data-testid="dev-banner"`, `data-testid="user-email">a@example.test`, `data-testid="card-team-red"`,
		`name="_csrf" value="tok"`, `href="/static/app.css?v=v1"`, `class="active"`, `&lt;script&gt;`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("home page lacks %s", want)
		}
	}
	if strings.Contains(html, "<script>") {
		t.Error("a user-controlled name was rendered as markup")
	}
}

func TestLayoutWithoutUserHasNoNavOrLogout(t *testing.T) {
	var buf bytes.Buffer
	if err := LandingPage(Page{Title: "Welcome"}, Landing{SignedOut: true}).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if strings.Contains(html, `data-testid="logout"`) || strings.Contains(html, `data-testid="dev-banner"`) {
		t.Error("anonymous page shows logout or the dev banner without DevIdP")
	}
	if !strings.Contains(html, `data-testid="signed-out"`) || !strings.Contains(html, `href="/login"`) {
		t.Error("signed-out landing lacks its message or the sign-in link")
	}
}

func TestErrorViewShowsRequestIDAndAction(t *testing.T) {
	var buf bytes.Buffer
	e := ErrorPage{Status: 404, Title: "Page not found", Message: "nothing", RequestID: "rid-1", Action: "Home", ActionURL: "/"}
	if err := ErrorView(Page{Title: "x"}, e).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{"Error 404", `data-testid="request-id">rid-1`, `href="/"`} {
		if !strings.Contains(html, want) {
			t.Errorf("error page lacks %s", want)
		}
	}
}
