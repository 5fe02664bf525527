package httpapi

import (
	"context"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Limiter spends one request of a subject's budget; *ratelimit.Limiter
// implements it. When refused it says how long to wait.
type Limiter interface {
	Allow(ctx context.Context, subject string) (allowed bool, retryAfter time.Duration, err error)
}

// overLimit answers 429 with Retry-After (whole seconds, at least 1) when
// l refuses subject, and reports whether it did. A limiter that fails lets
// the request through: Redis trouble shows up in the order path's own
// answer, and refusing every customer would be worse.
func (s *Server) overLimit(w http.ResponseWriter, r *http.Request, l Limiter, subject string) bool {
	if l == nil {
		return false
	}
	ok, after, err := l.Allow(r.Context(), subject)
	if err != nil {
		s.log.Warn("rate limit unavailable, request let through", "subject", subject, "err", err)
		return false
	}
	if ok {
		return false
	}
	setRetryAfter(w, after)
	s.writeError(w, r, &apiError{http.StatusTooManyRequests, "rate_limited", "too many requests; retry after the delay in Retry-After"})
	return true
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
