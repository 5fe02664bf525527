package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// StateReader reads the per-order state on the SKU's slot.
type StateReader interface {
	State(ctx context.Context, sku, orderID string) (string, error)
}

// Tracker answers order status queries: MySQL first (the truth for final
// orders), then Redis for orders accepted and not yet processed.
type Tracker struct {
	Ledger Ledger
	Idem   Lookup
	Stock  StateReader
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
	st, err := t.Stock.State(ctx, o.SKU, id)
	if err != nil {
		return OrderView{}, fmt.Errorf("%w: %w", order.ErrUnavailable, err)
	}
	if !inFlight(st) {
		return OrderView{}, fmt.Errorf("order %q: %w", id, order.ErrNotFound)
	}
	return OrderView{OrderID: id, Status: order.StatusAccepted, SKU: o.SKU, Qty: o.Qty, CustomerID: o.CustomerID}, nil
}

// inFlight tells whether an order state (keys.OrderState) belongs to an
// order on its way to MySQL: reserved (A), repeated (P), published again
// by the reconciler (R1, R2, ...), or committed (C: its MySQL row not
// visible to this read yet). S was sold out and never accepted; X was
// rejected (MySQL has it).
func inFlight(st string) bool {
	return st == "A" || st == "P" || st == "C" || strings.HasPrefix(st, "R")
}
