package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"surge/pkg/order"
)

// OrderView is what GET /v1/orders/{id} answers.
type OrderView struct {
	OrderID   string       `json:"order_id"`
	Status    order.Status `json:"status"`
	SKU       string       `json:"sku"`
	Qty       int          `json:"qty"`
	Reason    string       `json:"reason,omitempty"`
	InvoiceID int64        `json:"invoice_id,omitempty"`
	// CustomerID is the order's customer, never answered: with customer
	// tokens on, the order is shown to that customer only.
	CustomerID string `json:"-"`
}

// Ledger finds orders that reached MySQL (invoiced or rejected).
type Ledger interface {
	FinalOrder(ctx context.Context, id string) (OrderView, error)
}

// Lookup reads the gateway's own records of an order not final yet.
type Lookup interface {
	Lookup(ctx context.Context, id string) (order.Order, error)
}

// StateReader reads the per-order state on the SKU's slot and how long ago
// the order's open reservation was made, by the clock of the master that
// stamped it (negative when the order holds none). *stock.Stock
// implements it.
type StateReader interface {
	OrderState(ctx context.Context, sku, orderID string) (string, time.Duration, error)
}

// Tracker answers order status queries: MySQL first (the truth for final
// orders), then Redis for orders accepted and not yet processed.
type Tracker struct {
	Ledger Ledger
	Idem   Lookup
	Stock  StateReader
	// Undoable is the longest time after its reservation that the request
	// which reserved an order may still take it back and answer 503
	// unavailable: its publish plus its cleanup (the undo,
	// Service.CleanupTimeout). The publish must therefore end within a
	// bound, whatever it waits for (the orders ahead of it, a channel
	// being opened, the confirm): the Publisher's, which the wiring reads
	// from the publisher that keeps it (queue.Publisher.Bound,
	// SURGE_CONFIRM_TIMEOUT), so the two cannot disagree. An order
	// reserved by that request and not repeated since (state A) is
	// reported pending until its reservation is that old, so the status
	// never says accepted before the order is. No write on the accepting
	// path marks the answer; the reservation's own time on the master's
	// clock does. Zero reports such orders accepted at once.
	Undoable time.Duration
}

// Status returns the order's view or an error wrapping order.ErrNotFound.
func (t *Tracker) Status(ctx context.Context, id string) (OrderView, error) {
	if err := order.ValidateID(id); err != nil {
		return OrderView{}, fmt.Errorf("order %q: %w", id, order.ErrNotFound)
	}
	v, err := t.Ledger.FinalOrder(ctx, id)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, order.ErrNotFound) {
		return OrderView{}, fmt.Errorf("%w: %w", order.ErrUnavailable, err)
	}
	o, err := t.Idem.Lookup(ctx, id)
	if err != nil {
		return OrderView{}, unavailableUnless(err, order.ErrNotFound)
	}
	st, age, err := t.Stock.OrderState(ctx, o.SKU, id)
	if err != nil {
		return OrderView{}, fmt.Errorf("%w: %w", order.ErrUnavailable, err)
	}
	if !inFlight(st) {
		return OrderView{}, fmt.Errorf("order %q: %w", id, order.ErrNotFound)
	}
	status := order.StatusAccepted
	if t.mayBeUndone(st, age) {
		status = order.StatusPending
	}
	return OrderView{OrderID: id, Status: status, SKU: o.SKU, Qty: o.Qty, CustomerID: o.CustomerID}, nil
}

// mayBeUndone tells whether the request that reserved an order may still
// take the reservation back (lua/release.lua's undo): only that request
// can, only in state A (a repeat turns it into P, after which nobody
// can), and only until Undoable has passed since the reservation. The
// reserve script stamps the reservation with the master's clock and the
// age is read on the same master, so no gateway's clock is involved.
func (t *Tracker) mayBeUndone(st string, age time.Duration) bool {
	return st == "A" && age >= 0 && age < t.Undoable
}

// inFlight tells whether an order state (keys.OrderState) belongs to an
// order on its way to MySQL: reserved (A), repeated (P), published again
// by the reconciler (R1, R2, ...), or committed (C: its MySQL row not
// visible to this read yet). S was sold out and never accepted; X was
// rejected (MySQL has it).
func inFlight(st string) bool {
	return st == "A" || st == "P" || st == "C" || strings.HasPrefix(st, "R")
}
