package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"surge/lua"
	"surge/pkg/admin"
	"surge/pkg/keys"
)

// errVanished means the SKU's stock key disappeared between the read and
// the repair (deleted): nothing was changed.
var errVanished = errors.New("stock key vanished during the repair")

// apply runs the repair script for p against what v read and what MySQL
// said, and returns what it changed (or would change, when dryRun).
func apply(ctx context.Context, rdb Redis, sku string, v view, t Truth, p plan, ttl string, dryRun bool) (admin.Changes, error) {
	ks := []string{keys.Avail(sku), keys.Resv(sku), keys.Sold(sku), keys.Stock(sku)}
	dry := "0"
	if dryRun {
		dry = "1"
	}
	args := []any{t.Stock, t.Sold, v.stockRaw, v.soldRaw, ttl, dry, len(p.commits), len(p.releases)}
	for _, c := range p.commits {
		ks = append(ks, keys.OrderState(sku, c.id))
		args = append(args, c.id, c.qty)
	}
	for _, r := range p.releases {
		ks = append(ks, keys.OrderState(sku, r.id))
		args = append(args, r.id, r.held)
	}
	raw, err := lua.Reconcile.Run(ctx, rdb, ks, args...).Slice()
	if err != nil {
		return admin.Changes{}, fmt.Errorf("repair sku=%s: %w", sku, err)
	}
	ch, err := parseChanges(raw)
	if err != nil {
		return admin.Changes{}, fmt.Errorf("repair sku=%s: %w", sku, err)
	}
	return ch, nil
}

// parseChanges reads the script's reply (see lua/reconcile.lua).
func parseChanges(raw []any) (admin.Changes, error) {
	if len(raw) != 11 {
		return admin.Changes{}, fmt.Errorf("unexpected reply length %d", len(raw))
	}
	var ch admin.Changes
	var err error
	if ch.Before, err = counters(raw[0:4]); err != nil {
		return admin.Changes{}, err
	}
	if ch.After, err = counters(raw[4:8]); err != nil {
		return admin.Changes{}, err
	}
	aligned, _ := raw[8].(int64)
	if aligned < 0 {
		return admin.Changes{}, errVanished
	}
	ch.Aligned = aligned == 1
	ch.Committed = idList(raw[9])
	ch.Released = idList(raw[10])
	return ch, nil
}

// counters reads {stock, avail, sold, reserved}: strings as stored, or
// integers as computed, or nil for a missing key.
func counters(raw []any) (admin.Counters, error) {
	var c admin.Counters
	dst := []*int{&c.Stock, &c.Avail, &c.Sold, &c.Reserved}
	for i, v := range raw {
		switch x := v.(type) {
		case nil:
		case int64:
			*dst[i] = int(x)
		case string:
			n, err := strconv.Atoi(x)
			if err != nil {
				return admin.Counters{}, fmt.Errorf("counter %d: %w", i, err)
			}
			*dst[i] = n
		default:
			return admin.Counters{}, fmt.Errorf("counter %d: unexpected %T", i, v)
		}
	}
	c.Loaded = raw[0] != nil
	return c, nil
}

func idList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
