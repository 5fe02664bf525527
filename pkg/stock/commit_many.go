package stock

import (
	"context"
	"fmt"

	"surge/lua"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// CommitItem is one order of a CommitMany call.
type CommitItem struct {
	OrderID string
	Qty     int
}

// CommitMany commits several orders of one SKU in one script call, each
// exactly as Commit would in turn (lua/commit_many.lua): idempotent per
// order id, so an order already committed reports order.CommittedAlready
// and changes nothing. Run it only after MySQL committed every one of the
// orders' invoices. It fails whole with order.ErrNotLoaded when the SKU
// is not loaded (nothing changed).
func (s *Stock) CommitMany(ctx context.Context, sku string, items []CommitItem) ([]order.CommitOutcome, error) {
	if len(items) == 0 {
		return nil, nil
	}
	ks := make([]string, 3, 3+len(items))
	ks[0], ks[1], ks[2] = keys.Avail(sku), keys.Resv(sku), keys.Sold(sku)
	args := make([]any, 1, 1+2*len(items))
	args[0] = s.ttl
	for _, it := range items {
		if it.Qty < 1 {
			return nil, fmt.Errorf("commit sku=%s order=%s: qty %d: %w", sku, it.OrderID, it.Qty, order.ErrInvalid)
		}
		ks = append(ks, keys.OrderState(sku, it.OrderID))
		args = append(args, it.OrderID, it.Qty)
	}
	raw, err := lua.CommitMany.Run(ctx, s.rdb, ks, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("commit %d orders sku=%s: %w", len(items), sku, err)
	}
	if code, ok := raw.(int64); ok && code < 0 {
		return nil, fmt.Errorf("commit %d orders sku=%s: %w", len(items), sku, order.ErrNotLoaded)
	}
	codes, ok := raw.([]any)
	if !ok || len(codes) != len(items) {
		return nil, fmt.Errorf("commit %d orders sku=%s: unexpected reply %v", len(items), sku, raw)
	}
	out := make([]order.CommitOutcome, len(items))
	for i, c := range codes {
		n, ok := c.(int64)
		if !ok {
			return nil, fmt.Errorf("commit %d orders sku=%s: unexpected code %v", len(items), sku, c)
		}
		out[i] = order.CommitOutcome(n)
	}
	return out, nil
}
