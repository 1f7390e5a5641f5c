package devidp

import (
	"bytes"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// The pages use no inline script and no style attributes (the portal's CSP
// forbids both): plain class names, styled by the optional stylesheet.
const layoutHTML = `{{define "layout"}}<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>{{.Title}} · Development identity provider</title>
{{with .Stylesheet}}<link rel="stylesheet" href="{{.}}">{{end}}
</head>
<body class="devidp">
<div class="devidp-banner banner banner-warning" role="alert">
<strong>Development identity provider — not for production</strong>
<span>There are no passwords: anyone who can reach this provider can sign in as any of its users. It only runs with <code>portal serve --dev</code>.</span>
</div>
<main class="devidp-main">
<h1>{{.Title}}</h1>
{{template "content" .}}
</main>
</body>
</html>
{{end}}`

const loginHTML = `{{define "content"}}
<p class="devidp-intro">Choose the account to sign in to <code>{{.ClientID}}</code> with{{with .Scopes}} (scopes: {{range $i, $s := .}}{{if $i}}, {{end}}<code>{{$s}}</code>{{end}}){{end}}.</p>
<ul class="devidp-users">
{{range .Users}}<li class="devidp-user">
<form method="post" action="{{$.Action}}" class="devidp-user-form">
<input type="hidden" name="authRequestID" value="{{$.AuthRequestID}}">
<input type="hidden" name="username" value="{{.Username}}">
<div class="devidp-user-name">{{.Name}} <span class="devidp-user-username">({{.Username}})</span></div>
<div class="devidp-user-email">{{.Email}}</div>
<div class="devidp-user-groups">Groups: {{range $i, $g := .Groups}}{{if $i}}, {{end}}<code>{{$g}}</code>{{else}}<em>none</em>{{end}}</div>
<button type="submit" class="devidp-button button">Sign in as {{.Name}}</button>
</form>
</li>
{{end}}</ul>
{{end}}`

const errorHTML = `{{define "content"}}
<p class="devidp-error" role="alert">{{.Message}}</p>
<p>Start again from the application's sign-in link; a sign-in request expires after a few minutes and can be used once.</p>
{{end}}`

const loggedOutHTML = `{{define "content"}}
<p>You are signed out of the development identity provider.</p>
{{end}}`

var (
	loginPage     = mustPage(loginHTML)
	errorPage     = mustPage(errorHTML)
	loggedOutPage = mustPage(loggedOutHTML)
)

func mustPage(content string) *template.Template {
	t := template.Must(template.New("layout").Parse(layoutHTML))
	return template.Must(t.Parse(content))
}

type pageData struct {
	Title      string
	Stylesheet string

	// login
	ClientID      string
	Scopes        []string
	Users         []User
	Action        string
	AuthRequestID string

	// error
	Message string
}

const maxLoginForm = 16 << 10

// login serves GET (the user list) and POST (the chosen user) at
// <issuer>/login. Every client mistake answers a 400 page, never a 500.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		id := r.URL.Query().Get("authRequestID")
		a, err := s.storage.pendingAuthRequest(id)
		if err != nil {
			s.badRequest(w, sentence(err.Error()))
			return
		}
		s.render(w, http.StatusOK, loginPage, pageData{
			Title:         "Sign in",
			ClientID:      a.clientID,
			Scopes:        a.scopes,
			Users:         s.storage.userList(),
			Action:        s.prefix + loginPath,
			AuthRequestID: a.id,
		})
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
		if err := r.ParseForm(); err != nil {
			s.badRequest(w, "The sign-in form could not be read.")
			return
		}
		id := r.PostForm.Get("authRequestID")
		username := r.PostForm.Get("username")
		if err := s.storage.completeAuthRequest(id, username); err != nil {
			msg := sentence(err.Error())
			if errors.Is(err, errUnknownUser) {
				msg = "Unknown user " + strconv.Quote(username) + "."
			}
			s.badRequest(w, msg)
			return
		}
		// Hand over to the op's callback endpoint, which issues the code
		// and redirects to the client's redirect_uri. Only the path is
		// used, so the browser stays on the host it came in on.
		callback := op.AuthCallbackURL(s.provider)(r.Context(), id)
		if u, err := url.Parse(callback); err == nil {
			callback = u.RequestURI()
		}
		http.Redirect(w, r, callback, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
	}
}

func (s *server) loggedOut(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	s.render(w, http.StatusOK, loggedOutPage, pageData{Title: "Signed out"})
}

// sentence turns an error text into a sentence for the page.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}

func (s *server) badRequest(w http.ResponseWriter, msg string) {
	s.render(w, http.StatusBadRequest, errorPage, pageData{Title: "Cannot sign in", Message: msg})
}

func (s *server) render(w http.ResponseWriter, status int, t *template.Template, data pageData) {
	data.Stylesheet = s.stylesheet
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		slog.Error("devidp: render page", "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", s.csp)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
