package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/lua"
	"surge/pkg/admin"
	"surge/pkg/keys"
	"surge/pkg/stock"
)

// Redis is the part of a Redis Cluster client the reconciler needs.
// *redis.ClusterClient implements it.
type Redis interface {
	redis.Scripter
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

var _ Redis = (*redis.ClusterClient)(nil)

// Ledger is the MySQL side: the truth the reconciler aligns Redis with,
// and the log of its repairs. StoreLedger implements it.
type Ledger interface {
	// SKUs lists every product's SKU.
	SKUs(ctx context.Context) ([]string, error)
	// Snapshot reads, in one consistent snapshot, the product's stock and
	// sold, the orders among ids that exist, and the orders invoiced
	// within lookback. It fails wrapping order.ErrUnknownSKU when MySQL
	// has no such product.
	Snapshot(ctx context.Context, sku string, ids []string, lookback time.Duration) (Truth, error)
	// RecordRepair logs what was found and changed for a SKU.
	RecordRepair(ctx context.Context, sku string, found, changed any, dryRun bool) error
}

// Truth is what MySQL says about a SKU at one instant.
type Truth struct {
	Stock, Sold int
	// Orders holds the orders asked for by id that MySQL has.
	Orders map[string]OrderFact
	// Invoiced are the orders invoiced within the lookback window: the
	// ones whose commit a failover may have lost.
	Invoiced []OrderFact
	// Compensated counts the accepted orders rejected within the lookback
	// window because MySQL had no unit for them (order.ReasonCompensated)
	// or they would pass the customer's purchase limit
	// (order.ReasonPurchaseLimit): what a failover that lost Redis writes
	// cost buyers.
	Compensated int
	// MaxPerCustomer is the SKU's purchase limit per customer (0: none).
	MaxPerCustomer int
	// CustomerUnits maps each customer to the units MySQL invoiced to it
	// for the SKU; read only when the SKU has a limit.
	CustomerUnits map[string]int
}

// OrderFact is one final order as MySQL knows it.
type OrderFact struct {
	ID     string `db:"order_id"`
	Status string `db:"status"`
	Qty    int    `db:"qty"`
}

// view is one atomic read of a SKU's stock keys, keeping the raw values
// the repair script compares against.
type view struct {
	stockRaw, availRaw, soldRaw string
	// maxRaw is the purchase limit per customer ("" when none).
	maxRaw   string
	counters admin.Counters
	// resv maps order id to its raw reservation value (stock.ParseHeld).
	resv map[string]string
	// now is the master's clock at the read: reservation times are on it.
	now time.Time
}

func readView(ctx context.Context, rdb Redis, sku string) (view, error) {
	ks := []string{keys.Avail(sku), keys.Resv(sku), keys.Sold(sku), keys.Stock(sku), keys.MaxPerCustomer(sku)}
	raw, err := lua.View.Run(ctx, rdb, ks).Slice()
	if err != nil {
		return view{}, fmt.Errorf("read redis view sku=%s: %w", sku, err)
	}
	if len(raw) != 6 {
		return view{}, fmt.Errorf("read redis view sku=%s: unexpected reply length %d", sku, len(raw))
	}
	ms, _ := raw[4].(int64)
	v := view{resv: map[string]string{}, now: time.UnixMilli(ms)}
	v.stockRaw, _ = raw[0].(string)
	v.availRaw, _ = raw[1].(string)
	v.soldRaw, _ = raw[2].(string)
	v.maxRaw, _ = raw[5].(string)
	v.counters.Loaded = v.stockRaw != ""
	fields := []struct {
		raw string
		dst *int
	}{{v.stockRaw, &v.counters.Stock}, {v.availRaw, &v.counters.Avail}, {v.soldRaw, &v.counters.Sold}}
	for _, f := range fields {
		if f.raw == "" {
			continue
		}
		if *f.dst, err = strconv.Atoi(f.raw); err != nil {
			return view{}, fmt.Errorf("read redis view sku=%s: %w", sku, err)
		}
	}
	flat, _ := raw[3].([]any)
	for i := 0; i+1 < len(flat); i += 2 {
		id, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		h, err := stock.ParseHeld(val)
		if err != nil {
			return view{}, fmt.Errorf("read redis view sku=%s reservation %s: %w", sku, id, err)
		}
		v.resv[id] = val
		v.counters.Reserved += h.Qty
	}
	return v, nil
}

// committedStates reports which of the orders have state C on sku's slot,
// reading their state keys in batches (one slot, so MGET is allowed).
func committedStates(ctx context.Context, rdb Redis, sku string, ids []string) (map[string]bool, error) {
	const batch = 500
	done := make(map[string]bool, len(ids))
	for start := 0; start < len(ids); start += batch {
		part := ids[start:min(start+batch, len(ids))]
		ks := make([]string, len(part))
		for i, id := range part {
			ks[i] = keys.OrderState(sku, id)
		}
		vals, err := rdb.MGet(ctx, ks...).Result()
		if err != nil {
			return nil, fmt.Errorf("read order states sku=%s: %w", sku, err)
		}
		for i, v := range vals {
			if s, _ := v.(string); s == "C" {
				done[part[i]] = true
			}
		}
	}
	return done, nil
}
