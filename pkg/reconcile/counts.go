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

// repairCounts aligns the SKU's purchase limit in Redis with MySQL's (when
// Redis still holds what v read: a load racing is kept), then, with
// counts, the per-customer counts of a SKU with a limit
// (keys.CustomerUnits) with what MySQL invoiced to each customer and the
// counted reservations (lua/counts.lua), when Redis's sold still is sold,
// what the round's repair left: a commit since then could be of an order
// the MySQL read missed, counted nowhere; the counts are then left alone
// and aligned is false, so the round runs again. Without counts (the
// round's repair found sold moving already) only the limit is aligned. v
// was read before t, so a
// counted reservation of v whose order MySQL had not invoiced either is
// still open (counted from the live reservations), was committed since
// (counted from its state C) or was released (counted no more). The
// customers are those MySQL invoiced and those holding a counted
// reservation in v. A SKU without a limit costs nothing.
func repairCounts(ctx context.Context, rdb Redis, sku string, v view, t Truth, sold string, counts, dryRun bool) (*admin.LimitChange, []admin.CountChange, bool, error) {
	if t.MaxPerCustomer <= 0 && v.maxRaw == "" {
		return nil, nil, true, nil
	}
	if !counts {
		// No customer given: the script aligns the limit alone.
		v.resv, t.CustomerUnits = nil, nil
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
	ks := []string{keys.Resv(sku), keys.MaxPerCustomer(sku), keys.Sold(sku)}
	args := []any{len(names), len(counted), dry, t.MaxPerCustomer, v.maxRaw, sold}
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
	raw, err := lua.Counts.Run(ctx, rdb, ks, args...).Slice()
	if err != nil {
		return nil, nil, false, fmt.Errorf("repair customer counts sku=%s: %w", sku, err)
	}
	if len(raw) != 4 {
		return nil, nil, false, fmt.Errorf("repair customer counts sku=%s: unexpected reply length %d", sku, len(raw))
	}
	aligned, _ := raw[3].(int64)
	var limit *admin.LimitChange
	found, _ := raw[0].(string)
	left, _ := raw[1].(string)
	if found == "" {
		found = "0"
	}
	if found != left {
		limit = &admin.LimitChange{}
		limit.Old, _ = strconv.Atoi(found)
		limit.New, _ = strconv.Atoi(left)
	}
	var flat []string
	list, _ := raw[2].([]any)
	for _, x := range list {
		s, _ := x.(string)
		flat = append(flat, s)
	}
	changes, err := parseCounts(flat)
	return limit, changes, aligned == 1, err
}

// parseCounts reads lua/counts.lua's changes: {customer, old, new, ...}.
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
