package reconcile

import (
	"context"
	"fmt"
	"strconv"

	"surge/lua"
	"surge/pkg/admin"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// Publisher hands an order to the work queue and returns once the broker
// confirmed it. *queue.Publisher implements it.
type Publisher interface {
	Publish(ctx context.Context, o order.Order) error
}

// republish adopts the orders of ops (lua/adopt.lua: each one past its
// grace period, which doubles with every republish of the same order) and
// publishes each adopted one again, recording in ch what was published
// and what could not be (no publisher, or the publish failed: tried again
// later). A dry run only reports what would be published.
func (r *Reconciler) republish(ctx context.Context, sku string, ops []releaseOp, ch *admin.Changes, dryRun bool) error {
	if len(ops) == 0 {
		return nil
	}
	switch {
	case dryRun:
		ch.Republished = opIDs(ops)
		return nil
	case r.opts.Publisher == nil:
		ch.Unpublished = opIDs(ops)
		return nil
	}
	adopted, err := r.adopt(ctx, sku, ops)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if !adopted[op.id] {
			continue
		}
		o, err := heldOrder(sku, op)
		if err == nil {
			err = r.opts.Publisher.Publish(ctx, o)
		}
		if err != nil {
			r.opts.Log.Warn("publish an adopted order again", "sku", sku, "order_id", op.id, "err", err)
			ch.Unpublished = append(ch.Unpublished, op.id)
			continue
		}
		ch.Republished = append(ch.Republished, op.id)
	}
	return nil
}

func opIDs(ops []releaseOp) []string {
	ids := make([]string, len(ops))
	for i, op := range ops {
		ids[i] = op.id
	}
	return ids
}

// adopt runs lua/adopt.lua and returns the adopted ids.
func (r *Reconciler) adopt(ctx context.Context, sku string, ops []releaseOp) (map[string]bool, error) {
	ks := []string{keys.Resv(sku)}
	args := []any{r.opts.Grace.Milliseconds(), r.ttl}
	for _, op := range ops {
		ks = append(ks, keys.OrderState(sku, op.id))
		args = append(args, op.id, op.held)
	}
	raw, err := lua.Adopt.Run(ctx, r.rdb, ks, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("adopt orders sku=%s: %w", sku, err)
	}
	adopted := map[string]bool{}
	for _, id := range idList(raw) {
		adopted[id] = true
	}
	return adopted, nil
}

// heldOrder rebuilds the order a reservation holds, to publish it, with
// the purchase limit the reservation was made under, as the gateway
// publishes it: MySQL judges the order by that limit, not by one set
// since (none for a reservation recorded before reservations kept their
// limit: MySQL applies the product's).
func heldOrder(sku string, op releaseOp) (order.Order, error) {
	h, err := stock.ParseHeld(op.held)
	if err != nil {
		return order.Order{}, err
	}
	o := order.Order{ID: op.id, SKU: sku, Qty: h.Qty, CustomerID: h.CustomerID,
		AcceptedAtMs: h.ReservedAt.UnixMilli(), MaxPerCustomer: h.MaxPerCustomer}
	if err := o.Validate(); err != nil {
		return order.Order{}, fmt.Errorf("reservation %s=%s: %w", op.id, strconv.Quote(op.held), err)
	}
	return o, nil
}
