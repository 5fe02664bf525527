package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"surge/pkg/order"
	"surge/pkg/reqid"
)

// CustomerVerifier turns a customer's bearer token into their customer
// id. *customertoken.Verifier implements it. An error wrapping
// order.ErrUnavailable means the token could not be checked (the keys
// could not be fetched); any other error means it is not good.
type CustomerVerifier interface {
	Verify(ctx context.Context, token string) (customerID string, err error)
}

// customerRealm names the protection space in WWW-Authenticate.
const customerRealm = "surge"

// Codes of the answers about customer tokens (docs/API.md).
const (
	codeUnauthenticated  = "unauthenticated"
	codeCustomerMismatch = "customer_mismatch"
)

// errCustomerMismatch answers a body whose customer_id is not the
// token's subject: a customer the shop vouches for orders as themself.
var errCustomerMismatch = &apiError{http.StatusForbidden, codeCustomerMismatch,
	"customer_id differs from the customer the bearer token names; send the token's customer or leave customer_id out"}

// customer authenticates r when customer tokens are on (Customers set):
// it returns the token's customer, or answers r (401 unauthenticated, or
// 503 unavailable with the verifier's Retry-After when the keys cannot
// tell yet) and returns false.
// With customer tokens off it returns "" and true. It runs before
// anything else of the request, so a refused request spends no rate
// budget and leaves no idempotency record.
func (s *Server) customer(w http.ResponseWriter, r *http.Request) (string, bool) {
	if s.Customers == nil {
		return "", true
	}
	raw, ok := bearerToken(r)
	if !ok {
		// RFC 6750 3.1: a request with no credentials gets no error code.
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+customerRealm+`"`)
		s.writeError(w, r, &apiError{http.StatusUnauthorized, codeUnauthenticated,
			"a bearer token from the shop is required (Authorization: Bearer <token>)"})
		return "", false
	}
	id, err := s.Customers.Verify(r.Context(), raw)
	switch {
	case err == nil:
		return id, true
	case errors.Is(err, order.ErrUnavailable):
		// Debug too: anyone can send a token naming a key the set does
		// not hold yet; a failed fetch of the keys is logged once, by
		// the verifier's owner.
		s.log.Debug("customer token not checked yet", "path", r.URL.Path, "request_id", reqid.From(r.Context()), "err", err)
		s.answerError(w, err)
		return "", false
	}
	// Debug: anyone can send bad tokens, and each would be a line.
	s.log.Debug("customer token refused", "path", r.URL.Path, "request_id", reqid.From(r.Context()), "err", err)
	w.Header().Set("WWW-Authenticate", `Bearer realm="`+customerRealm+`", error="invalid_token", error_description="the token is expired, not yet valid, for another audience, or not signed by the shop"`)
	s.writeError(w, r, &apiError{http.StatusUnauthorized, codeUnauthenticated,
		"the bearer token is invalid: expired, not yet valid, for another audience, or not signed by the shop"})
	return "", false
}

// bearerToken is the token of an "Authorization: Bearer" header (the
// scheme is case-insensitive, RFC 7235).
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// ownCustomer makes req's customer the authenticated one: a body without
// customer_id takes it, one naming another customer is refused. With
// customer tokens off (authenticated ""), req is left as it is.
func ownCustomer(req *orderRequest, authenticated string) error {
	switch {
	case authenticated == "":
		return nil
	case req.CustomerID == nil:
		req.CustomerID = &authenticated
		return nil
	case *req.CustomerID != authenticated:
		return errCustomerMismatch
	}
	return nil
}

// ownsOrder tells whether the order id may be shown to the authenticated
// customer: always with customer tokens off (authenticated ""). An id
// carries its customer's tag, so another customer's id is refused before
// any engine is read; the full customer is compared once the order is.
func ownsOrder(id, authenticated string) bool {
	return authenticated == "" || order.CustomerTag(id) == order.TagFor(authenticated)
}
