package gateway

import (
	"context"
	"errors"
	"fmt"

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
	// 'A' accepted and 'C' committed (MySQL row not visible yet to this
	// read) are both in flight; 'S' was sold out and never accepted.
	if st != "A" && st != "C" {
		return OrderView{}, fmt.Errorf("order %q: %w", id, order.ErrNotFound)
	}
	return OrderView{OrderID: id, Status: order.StatusAccepted, SKU: o.SKU, Qty: o.Qty}, nil
}
