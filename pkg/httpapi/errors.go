package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"surge/pkg/order"
	"surge/pkg/reqid"
)

// errorBody is the contract's error shape: {"error":{"code","message"}},
// plus the order's id when its outcome is unknown (outcome_unknown), so
// the client can ask for it.
type errorBody struct {
	Error   errorDetail `json:"error"`
	OrderID string      `json:"order_id,omitempty"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// apiError is an error with its HTTP status and code chosen already.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// errorCodes maps domain errors to statuses and codes: the one table the
// HTTP contract is read from, first match first. Anything else is a
// dependency failure: 503, retryable. "unavailable" promises the order was
// not taken; "outcome_unknown" says it may have been.
var errorCodes = []struct {
	err    error
	status int
	code   string
}{
	{order.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{order.ErrSoldOut, http.StatusConflict, "sold_out"},
	{order.ErrPurchaseLimit, http.StatusConflict, "purchase_limit"},
	{order.ErrUnknownSKU, http.StatusNotFound, "unknown_sku"},
	{order.ErrNotFound, http.StatusNotFound, "not_found"},
	{order.ErrIdempotencyMismatch, http.StatusUnprocessableEntity, "idempotency_mismatch"},
	{order.ErrRateLimited, http.StatusTooManyRequests, "rate_limited"},
	{order.ErrConflict, http.StatusConflict, "conflict"},
	{order.ErrOutcomeUnknown, http.StatusServiceUnavailable, "outcome_unknown"},
	{order.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{order.ErrNotLoaded, http.StatusServiceUnavailable, "unavailable"},
}

// publicMessages replace internal detail (addresses, driver text) in the
// answers to clients; the full error goes to the log.
var publicMessages = map[string]string{
	"sold_out":       "not enough units left for this order",
	"purchase_limit": "this order would take the customer past the product's purchase limit per customer",
	"unavailable":    "the service cannot take this request right now; retry later",
	"rate_limited":   "too many requests; retry after the delay in Retry-After",
	"outcome_unknown": "the order may or may not have been taken; retry with the same Idempotency-Key " +
		"after Retry-After, or read the order's status, for the settled answer",
}

func classify(err error) (status int, code, msg string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status, ae.code, ae.msg
	}
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			// The public message, when the code has one: the cause is not
			// spelt (the bulk of a flash sale is answered here).
			if m, ok := publicMessages[c.code]; ok {
				return c.status, c.code, m
			}
			return c.status, c.code, err.Error()
		}
	}
	return http.StatusServiceUnavailable, "unavailable", publicMessages["unavailable"]
}

// publicBodies are the answers carrying a public message and nothing else,
// encoded once: the bulk of a flash sale is answered with one of them.
var publicBodies = func() map[string][]byte {
	m := make(map[string][]byte, len(publicMessages))
	for code, msg := range publicMessages {
		b, err := json.Marshal(errorBody{Error: errorDetail{Code: code, Message: msg}})
		if err != nil {
			panic(err)
		}
		m[code] = append(b, '\n') // as json.Encoder ends a value
	}
	return m
}()

// writeErrorBody writes body, from publicBodies when it is one of them.
func writeErrorBody(w http.ResponseWriter, status int, body errorBody) {
	if b, ok := publicBodies[body.Error.Code]; ok && body.OrderID == "" && body.Error.Message == publicMessages[body.Error.Code] {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err (answerError) and logs it when it is a failure
// (5xx).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, orderID := s.answerError(w, err)
	if status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", status,
			"code", code, "order_id", orderID, "request_id", reqid.From(r.Context()), "err", err)
	}
}

// answerError answers err with its status and code from the table, and
// the headers the error carries (Retry-After, the rate limit's); it
// returns what it answered.
func (s *Server) answerError(w http.ResponseWriter, err error) (status int, code, orderID string) {
	status, code, msg := classify(err)
	body := errorBody{Error: errorDetail{Code: code, Message: msg}}
	if status == http.StatusServiceUnavailable {
		setRetryAfter(w, order.RetryAfterUnavailable)
	}
	var unavailable *order.UnavailableError
	if errors.As(err, &unavailable) && unavailable.RetryAfter > 0 && status == http.StatusServiceUnavailable {
		setRetryAfter(w, unavailable.RetryAfter)
	}
	var unknown *order.UnknownOutcomeError
	if errors.As(err, &unknown) {
		body.OrderID = unknown.OrderID
		setRetryAfter(w, order.RetryAfterUnknown)
		if unknown.RetryAfter > 0 {
			setRetryAfter(w, unknown.RetryAfter)
		}
	}
	var rl *order.RateLimitedError
	if errors.As(err, &rl) && status == http.StatusTooManyRequests {
		setRetryAfter(w, rl.RetryAfter)
		s.setRateLimitHeaders(w, rl.Scope, rl.RetryAfter)
	}
	writeErrorBody(w, status, body)
	return status, code, body.OrderID
}

// failureBody is the error shape plus, when part of an operation was done
// before it failed, the report of what was done.
type failureBody struct {
	Error  errorDetail `json:"error"`
	Report any         `json:"report,omitempty"`
}

// writeFailure answers an admin operation's error with its status and code
// from the contract's table and its full message (operators need the
// detail), with report (nil when nothing was done).
func (s *Server) writeFailure(w http.ResponseWriter, r *http.Request, what string, err error, report any) {
	status, code, msg := classify(err)
	var ae *apiError
	if !errors.As(err, &ae) {
		msg = err.Error()
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if status >= 500 {
		s.log.Error(what+" failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	writeJSON(w, status, failureBody{Error: errorDetail{Code: code, Message: msg}, Report: report})
}
