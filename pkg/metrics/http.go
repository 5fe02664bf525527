package metrics

import (
	"surge/pkg/httpstatus"

	"net/http"
	"strconv"
	"time"
)

// Middleware records each request's latency by route, method (the
// standard ones, else "other") and status.
// The route is the ServeMux pattern that matched ("POST /v1/orders",
// "GET /v1/orders/{id}"), so ids never become labels; a request no route
// matched counts as "unmatched". Wrap the mux itself: it fills in the
// pattern on the request it is given.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := httpstatus.Wrap(w)
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		httpDuration.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(sw.Status)).Observe(time.Since(start).Seconds())
	})
}

// methodLabel bounds the method label: a client may send any token as
// its method, and each would be a new series.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
