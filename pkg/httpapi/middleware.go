package httpapi

import (
	"net/http"
	"time"

	"github.com/rs/cors"

	"surge/pkg/reqid"
)

// HeaderRequestID names the request id every answer carries.
const HeaderRequestID = "X-Request-Id"

// RequestIDs gives every request an id: the client's X-Request-Id when it
// is well formed (reqid.Valid), else a new one. The answer carries it,
// and so does the request's context, for the log lines about it.
func RequestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !reqid.Valid(id) {
			id = reqid.New()
		}
		w.Header().Set(HeaderRequestID, id)
		next.ServeHTTP(w, r.WithContext(reqid.With(r.Context(), id)))
	})
}

// CORS lets browser checkouts on the given origins (exact matches) call
// the public API: GET and POST with Content-Type, Idempotency-Key,
// X-Request-Id and Authorization (the customer's token, when the shop
// vouches for its customers), reading Location, Retry-After, the
// rate-limit headers, WWW-Authenticate and the request id. Any other origin gets no CORS header, so its browser
// refuses the answer. No origin: h unchanged.
func CORS(origins []string, h http.Handler) http.Handler {
	if len(origins) == 0 {
		return h
	}
	return cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: []string{http.MethodGet, http.MethodPost},
		AllowedHeaders: []string{"Content-Type", "Idempotency-Key", HeaderRequestID, "Authorization"},
		ExposedHeaders: []string{"Location", "Retry-After", "RateLimit", "RateLimit-Policy", "WWW-Authenticate", HeaderRequestID},
		MaxAge:         int((10 * time.Minute).Seconds()),
	}).Handler(h)
}
