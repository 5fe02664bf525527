package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"surge/pkg/order"
)

// Limiter spends one request of a subject's budget; *ratelimit.Limiter
// implements it. When refused it says how long to wait.
type Limiter interface {
	Allow(ctx context.Context, subject string) (allowed bool, retryAfter time.Duration, err error)
}

// LimitObserver is told each decision of a limit the server applies
// (metrics): allowed or not, or err when the limiter failed (the request
// is then let through). scope is ScopeIP.
type LimitObserver interface {
	LimitDecided(scope string, allowed bool, err error)
}

// overLimit returns a *order.RateLimitedError (answered 429 with
// Retry-After) when l refuses subject, nil otherwise. A limiter that fails
// lets the request through: Redis trouble shows up in the order path's
// own answer, and refusing every customer would be worse.
func (s *Server) overLimit(r *http.Request, l Limiter, subject string) error {
	if l == nil {
		return nil
	}
	ok, after, err := l.Allow(r.Context(), subject)
	if s.LimitObserver != nil {
		s.LimitObserver.LimitDecided(ScopeIP, ok, err)
	}
	if err != nil {
		s.log.Warn("rate limit unavailable, request let through", "subject", subject, "err", err)
		return nil
	}
	if ok {
		return nil
	}
	return fmt.Errorf("client address %s: %w", subject, &order.RateLimitedError{RetryAfter: after, Scope: ScopeIP})
}

// ScopeIP names the client address's budget in rate-limit answers.
const ScopeIP = "ip"

// RatePolicy describes one budget for the RateLimit-Policy header
// (draft-ietf-httpapi-ratelimit-headers): Quota requests per Window (the
// burst, and the time an idle budget takes to fill up again).
type RatePolicy struct {
	Quota  int
	Window time.Duration
}

// setRateLimitHeaders sets RateLimit-Policy and RateLimit for a refusal
// in scope: no request left, the budget has one again after retry.
func (s *Server) setRateLimitHeaders(w http.ResponseWriter, scope string, retry time.Duration) {
	p, ok := s.RatePolicies[scope]
	if !ok || scope == "" {
		return
	}
	w.Header().Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", scope, p.Quota, seconds(p.Window)))
	w.Header().Set("RateLimit", fmt.Sprintf("%q;r=0;t=%d", scope, seconds(retry)))
}

// seconds is d in whole seconds, rounded up, at least 1.
func seconds(d time.Duration) int { return max(int(math.Ceil(d.Seconds())), 1) }

// setRetryAfter sets Retry-After to after in whole seconds, at least 1.
func setRetryAfter(w http.ResponseWriter, after time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(seconds(after)))
}
