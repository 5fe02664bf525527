package metrics

import (
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
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		httpDuration.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(sw.status)).Observe(time.Since(start).Seconds())
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

// statusWriter remembers the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
