package web

import (
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"
)

// loadAndSave is scs's LoadAndSave (github.com/alexedwards/scs/v2 v2.9.0,
// session.go: load the session named by the cookie, commit it before the
// response's first byte) as an echo middleware, with one difference: the
// session cookie is written only when its bytes change. scs writes it,
// with a second Cache-Control header, on every response of a session
// with an idle timeout (Load marks such a session modified so that Commit
// moves its expiry). The portal's cookie is a browser-session cookie
// (Cookie.Persist false, no RememberMe), so while the token is the one
// the browser sent, that Set-Cookie repeats what the browser holds (make
// bench, issue 33: the headers were a twelfth of a cached page's cost).
// Commit still runs on every modified session: the store moves the idle
// expiry (store.SessionStore's refresh granularity).
func (s *Server) loadAndSave(next echo.HandlerFunc) echo.HandlerFunc {
	sm := s.sessions
	return func(c echo.Context) error {
		r := c.Request()
		res := c.Response()
		// Header().Add("Vary", "Cookie"), without canonicalizing the key
		// and allocating its value for every response (a shared clipped
		// slice: an Add to it reallocates).
		if h := res.Header(); h["Vary"] == nil {
			h["Vary"] = varyCookie
		} else {
			h["Vary"] = append(h["Vary"], "Cookie")
		}
		var sent string
		if ck, err := r.Cookie(sm.Cookie.Name); err == nil {
			sent = ck.Value
		}
		ctx, err := sm.Load(r.Context(), sent)
		if err != nil {
			sm.ErrorFunc(res, r, err)
			return nil
		}
		r = r.WithContext(ctx)
		c.SetRequest(r)
		// As echo.WrapMiddleware(scs's LoadAndSave) did: the handler
		// writes to a new Response around the session's writer.
		sw := &sessionWriter{ResponseWriter: res, sm: sm, r: r, sent: sent}
		c.SetResponse(echo.NewResponse(sw, c.Echo()))
		err = next(c)
		if !sw.written {
			sw.commit()
		}
		return err
	}
}

var varyCookie = []string{"Cookie"}[:1:1]

// sessionWriter commits the session before the response's status line,
// as scs's sessionResponseWriter does.
type sessionWriter struct {
	http.ResponseWriter
	sm      *scs.SessionManager
	r       *http.Request
	sent    string // the token of the request's cookie
	written bool
}

func (w *sessionWriter) WriteHeader(code int) {
	if !w.written {
		w.commit()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.commit()
	}
	return w.ResponseWriter.Write(b)
}

func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// commit is scs's commitAndWriteSessionCookie, writing the cookie only
// when it is not the one the request sent.
func (w *sessionWriter) commit() {
	w.written = true
	ctx := w.r.Context()
	switch w.sm.Status(ctx) {
	case scs.Modified:
		token, expiry, err := w.sm.Commit(ctx)
		if err != nil {
			w.sm.ErrorFunc(w.ResponseWriter, w.r, err)
			return
		}
		if token != w.sent || w.sm.Cookie.Persist || w.sm.GetBool(ctx, "__rememberMe") {
			w.sm.WriteSessionCookie(ctx, w.ResponseWriter, token, expiry)
		}
	case scs.Destroyed:
		w.sm.WriteSessionCookie(ctx, w.ResponseWriter, "", time.Time{})
	}
}
