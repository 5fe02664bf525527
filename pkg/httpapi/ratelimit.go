package httpapi

import (
	"context"
	"fmt"
	"math"
	"net"
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

// overLimit returns a *order.RateLimitedError (answered 429 with
// Retry-After) when l refuses subject, nil otherwise. A limiter that fails
// lets the request through: Redis trouble shows up in the order path's
// own answer, and refusing every customer would be worse.
func (s *Server) overLimit(r *http.Request, l Limiter, subject string) error {
	if l == nil {
		return nil
	}
	ok, after, err := l.Allow(r.Context(), subject)
	if err != nil {
		s.log.Warn("rate limit unavailable, request let through", "subject", subject, "err", err)
		return nil
	}
	if ok {
		return nil
	}
	return fmt.Errorf("client address %s: %w", subject, &order.RateLimitedError{RetryAfter: after})
}

// setRetryAfter sets Retry-After to after in whole seconds, at least 1.
func setRetryAfter(w http.ResponseWriter, after time.Duration) {
	secs := int(math.Ceil(after.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
}

// clientIP is the address the request came from. X-Forwarded-For is not
// trusted: any client could set it to escape its limit.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
