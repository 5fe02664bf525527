package order

import (
	"errors"
	"fmt"
	"time"
)

// Domain errors. Adapters wrap them with %w; the HTTP layer, opsctl and the
// worker's classifier test them with errors.Is.
var (
	// ErrInvalid marks input that fails validation; the message says which field.
	ErrInvalid = errors.New("invalid request")
	// ErrSoldOut means the SKU has fewer units available than asked for.
	ErrSoldOut = errors.New("sold out")
	// ErrPurchaseLimit means the order would take its customer past the
	// SKU's purchase limit per customer (units reserved or committed).
	// Like ErrSoldOut it is a "not taken" answer.
	ErrPurchaseLimit = errors.New("purchase limit per customer reached")
	// ErrUnknownSKU means no product exists under that SKU.
	ErrUnknownSKU = errors.New("unknown sku")
	// ErrNotLoaded means the SKU's stock is not in Redis (never loaded, or
	// lost); the gateway must not sell it.
	ErrNotLoaded = errors.New("stock not loaded")
	// ErrIdempotencyMismatch means an idempotency key was reused with a
	// different request body.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different body")
	// ErrNotFound means the order (or other object) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable means a dependency failed; the caller may retry.
	ErrUnavailable = errors.New("unavailable")
	// ErrConflict means the request contradicts the current state (for
	// example stock set below what is already sold).
	ErrConflict = errors.New("conflict")
	// ErrStaleFence means a write carried a fencing token lower than one
	// already recorded: a newer lock holder owns the order.
	ErrStaleFence = errors.New("stale fencing token")
	// ErrRateLimited means the customer spent their request budget; a
	// *RateLimitedError says how long to wait.
	ErrRateLimited = errors.New("rate limited")
	// ErrOutcomeUnknown means the gateway cannot know whether the order
	// was taken: RabbitMQ may hold it (a confirm that did not come in
	// time, a connection lost after the publish was written). Unlike
	// ErrUnavailable, the reservation and the idempotency record are
	// kept until the outcome settles; an *UnknownOutcomeError names the
	// order.
	ErrOutcomeUnknown = errors.New("outcome unknown")
)

// UnknownOutcomeError answers an order whose fate the gateway cannot know
// yet. It matches ErrOutcomeUnknown with errors.Is; a retry with the same
// idempotency key, or the order's status, tells the settled truth.
type UnknownOutcomeError struct {
	// OrderID is the order whose outcome is unknown.
	OrderID string
	// Cause is what made it unknown (a confirm timeout, a lost channel).
	// It is not unwrapped: the cause may wrap ErrUnavailable (a publish
	// that failed for certain after a repeat), and this order's answer is
	// not that.
	Cause error
	// RetryAfter, when set, is when a retry is worth it (another request
	// for the order is still in progress until then).
	RetryAfter time.Duration
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("order %s: %v: %v", e.OrderID, ErrOutcomeUnknown, e.Cause)
}

// Is reports whether target is ErrOutcomeUnknown.
func (e *UnknownOutcomeError) Is(target error) bool { return target == ErrOutcomeUnknown }

// RateLimitedError refuses a request over its budget. It matches
// ErrRateLimited with errors.Is.
type RateLimitedError struct {
	// RetryAfter is how long until one request fits the budget again.
	RetryAfter time.Duration
	// Scope names the budget: "customer" or "ip".
	Scope string
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%v: retry after %v", ErrRateLimited, e.RetryAfter)
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// UnavailableError is a "not taken, retry" answer that knows when a retry
// can do better than this one: before then it would be answered the same.
// It matches ErrUnavailable with errors.Is, and unwraps to its cause.
type UnavailableError struct {
	// Cause is what is not available yet.
	Cause error
	// RetryAfter is how long until a retry may be answered otherwise.
	RetryAfter time.Duration
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%v: retry after %v", e.Cause, e.RetryAfter)
}

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Cause }

// invalid builds a validation error that wraps ErrInvalid.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Invalid is invalid for other packages that validate their own inputs.
func Invalid(format string, args ...any) error { return invalid(format, args...) }
