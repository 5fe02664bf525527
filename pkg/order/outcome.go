package order

import (
	"errors"
	"time"
)

// The outcomes the order path's adapters report to the gateway and the
// worker: what a reservation did in Redis, what MySQL did with an order,
// how a commit or a release settled. They live here so that the consumers
// declare their interfaces in the domain's words and need no adapter.

// Reservation says how a Reserve call ended.
type Reservation struct {
	// Repeat is true when the order id had been reserved before: nothing
	// changed and the first outcome is reported again.
	Repeat bool
	// Avail is the number of units left after a fresh reservation, or
	// available when a fresh order found too few (ErrSoldOut).
	Avail int
	// Nonce identifies this call's reservation, also when Reserve failed
	// and may have reserved anyway (a timeout after the script ran): Undo
	// takes it back only with the same nonce.
	Nonce string
	// MaxPerCustomer is the purchase limit per customer the order was
	// reserved under (0: none), as Redis recorded it with the reservation;
	// the order carries it to MySQL (Order.MaxPerCustomer). Nil when the
	// script could not tell: a repeat of an order whose reservation is
	// settled (MySQL holds its outcome) or was made before reservations
	// recorded their limit.
	MaxPerCustomer *int
}

// ErrUndone answers a retry's reservation (ReserveRetry) for an order its
// first request undid (its publish certainly failed) while the retry was
// on its way: the order was not taken, and the retry does not take it.
var ErrUndone = errors.New("order undone by its first request")

// CommitOutcome says how a Commit call ended.
type CommitOutcome int

// Commit outcomes, as the commit script reports them.
const (
	CommittedAlready   CommitOutcome = 0
	CommittedFromResv  CommitOutcome = 1
	CommittedFromAvail CommitOutcome = 2
)

// ReleaseMode says why a release runs: see lua/release.lua.
type ReleaseMode string

// Release modes.
const (
	// ReleaseRejected releases whatever the order holds and keeps its
	// state, so that a retry is answered as before: the order ended
	// rejected.
	ReleaseRejected ReleaseMode = "reject"
)

// ErrCommitted is returned by a release for an order already
// committed: sold units are never released.
var ErrCommitted = errors.New("order already committed")

// ErrNotYours is returned by Undo when the reservation is not the
// caller's to take back: another request reserved it, or a repeat (or
// the reconciler) may have published the order since. Nothing changed.
var ErrNotYours = errors.New("reservation not held by this request")

// Processed is the outcome of processing one order.
type Processed struct {
	// Status is StatusInvoiced or StatusRejected.
	Status Status
	// Reason says why a rejected order was refused (ReasonCompensated).
	Reason string
	// InvoiceID and AmountCents describe the invoice of an invoiced order.
	// InvoiceID is 0 for an order a batch invoiced just now (the batch does
	// not read its ids back; MySQL holds them), set for a duplicate.
	InvoiceID   int64
	AmountCents int64
	// Duplicate is true when the order had already been processed: nothing
	// was written and the fields above are the first outcome.
	Duplicate bool
	// Recorded is, for a duplicate, the order as MySQL holds it: another
	// SKU, quantity or customer than the one processed means the id was
	// reused for another request, not retried.
	Recorded Order
}

// The delays the gateway asks a client to wait before it retries an order
// (Retry-After), besides a rate limit's own wait. They are horizons the
// idempotency record must outlive (config.IdempotencyFloor): a retry that
// finds no record names a new order.
const (
	// RetryAfterUnavailable follows 503 unavailable (not taken).
	RetryAfterUnavailable = time.Second
	// RetryAfterUnknown follows 503 outcome_unknown: about the publisher's
	// confirm timeout, after which a retry usually finds the outcome
	// settled.
	RetryAfterUnknown = 2 * time.Second
)

// Sighting is what one read of a SKU saw, for the gateway's sold-out
// answers: the units left and, for each order id asked about, whether an
// order of that id was reserved (on its way, committed or rejected since),
// so that a retry of it must get its own answer.
type Sighting struct {
	// Loaded is false when the SKU's stock is not in Redis.
	Loaded bool
	// Avail is the number of units left.
	Avail int
	// Reserved[i] tells whether the i-th id asked about names a reserved
	// order.
	Reserved []bool
}
