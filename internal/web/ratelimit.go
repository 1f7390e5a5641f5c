package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"

	"github.com/hyperpod-governance/portal/internal/views"
)

// DefaultLoginRateLimit is how many requests to /login and /auth/callback
// one client address may make per minute (a sign-in is two of them).
const DefaultLoginRateLimit = 60

// loginRateLimiter limits /login and /auth/callback per client address, in
// memory (a token bucket per address: Options.LoginRateLimit per minute,
// the same number at once). The address is c.RealIP with the server's
// IPExtractor, so a client cannot rotate it with X-Forwarded-For unless it
// comes through a configured trusted proxy. Refused requests get a 429 page.
func (s *Server) loginRateLimiter() echo.MiddlewareFunc {
	n := s.opts.LoginRateLimit
	return middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: rate.Limit(float64(n) / 60), Burst: n, ExpiresIn: 10 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) { return c.RealIP(), nil },
		DenyHandler: func(c echo.Context, id string, _ error) error {
			retry := int(time.Minute/time.Second) / n
			if retry < 1 {
				retry = 1
			}
			c.Response().Header().Set("Retry-After", strconv.Itoa(retry))
			return &userError{page: views.ErrorPage{
				Status:  http.StatusTooManyRequests,
				Title:   "Too many sign-in attempts",
				Message: "This address has started or finished too many sign-ins in the last minute. Wait a minute and try again.",
				Action:  "Try again", ActionURL: "/login",
			}, err: &rateLimited{id}}
		},
	})
}

type rateLimited struct{ addr string }

func (r *rateLimited) Error() string { return "login rate limit reached for " + r.addr }
