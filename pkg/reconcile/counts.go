package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"surge/lua"
	"surge/pkg/admin"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// repairCounts aligns the per-customer counts of a SKU with a purchase
// limit (keys.CustomerUnits) with what MySQL invoiced to each customer and
// the counted reservations (lua/counts.lua). v was read before t, so a
// counted reservation of v whose order MySQL had not invoiced either is
// still open (counted from the live reservations), was committed since
// (counted from its state C) or was released (counted no more). The
// customers are those MySQL invoiced and those holding a counted
// reservation in v. A SKU without a limit costs nothing.
func repairCounts(ctx context.Context, rdb Redis, sku string, v view, t Truth, dryRun bool) ([]admin.CountChange, error) {
	if t.MaxPerCustomer <= 0 {
		return nil, nil
	}
	type held struct {
		id, customer string
		qty          int
	}
	var counted []held
	customers := make(map[string]int, len(t.CustomerUnits))
	for c, n := range t.CustomerUnits {
		customers[c] = n
	}
	for _, id := range sortedKeys(v.resv) {
		h, err := stock.ParseHeld(v.resv[id])
		if err != nil || !h.Counted {
			continue
		}
		counted = append(counted, held{id, h.CustomerID, h.Qty})
		customers[h.CustomerID] += 0
	}
	names := make([]string, 0, len(customers))
	for c := range customers {
		names = append(names, c)
	}
	slices.Sort(names)
	dry := "0"
	if dryRun {
		dry = "1"
	}
	ks := []string{keys.Resv(sku), keys.MaxPerCustomer(sku)}
	args := []any{len(names), len(counted), dry}
	for _, c := range names {
		ks = append(ks, keys.CustomerUnits(sku, c))
		args = append(args, c, customers[c])
	}
	var invoiced []any
	for _, h := range counted {
		ks = append(ks, keys.OrderState(sku, h.id))
		args = append(args, h.id, h.customer, h.qty)
		if o, ok := t.Orders[h.id]; ok && o.Status == string(order.StatusInvoiced) {
			invoiced = append(invoiced, h.id)
		}
	}
	args = append(append(args, len(invoiced)), invoiced...)
	raw, err := lua.Counts.Run(ctx, rdb, ks, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("repair customer counts sku=%s: %w", sku, err)
	}
	return parseCounts(raw)
}

// parseCounts reads lua/counts.lua's reply: {customer, old, new, ...}.
func parseCounts(raw []string) ([]admin.CountChange, error) {
	var out []admin.CountChange
	for i := 0; i+2 < len(raw); i += 3 {
		ch := admin.CountChange{Customer: raw[i], Old: -1}
		var err error
		if raw[i+1] != "" {
			if ch.Old, err = strconv.Atoi(raw[i+1]); err != nil {
				return nil, fmt.Errorf("customer count %q: %w", raw[i+1], err)
			}
		}
		if ch.New, err = strconv.Atoi(raw[i+2]); err != nil {
			return nil, fmt.Errorf("customer count %q: %w", raw[i+2], err)
		}
		out = append(out, ch)
	}
	return out, nil
}
