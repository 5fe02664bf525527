package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"surge/pkg/keys"
)

// Counters is a SKU's stock counters without its reservations: what a
// board of many SKUs needs, read for all of them in one pipeline. Reserved
// is derived (stock - avail - sold); Holds is the number of open
// reservations (HLEN), so a SKU whose counters do not add up shows as
// Reserved < 0, or as units reserved without a reservation (or the
// reverse). View reads the reservations themselves.
type Counters struct {
	SKU string
	// Loaded is false when Redis holds no stock for the SKU.
	Loaded                    bool
	Stock, Avail, Sold, Holds int
	Reserved                  int
}

// Balanced reports whether the counters agree with the open reservations
// as far as they can tell: no negative reserved units, and units reserved
// exactly when a reservation is open.
func (c Counters) Balanced() bool {
	return c.Reserved >= 0 && (c.Reserved > 0) == (c.Holds > 0) && c.Reserved >= c.Holds
}

// ReadCounters reads the counters of every SKU in skus with one pipeline:
// per SKU one MGET of stock, avail and sold (one slot: they share the hash
// tag) and one HLEN of its reservations, all O(1). A cluster client sends
// each master its share in one round trip. The result is in skus' order.
func ReadCounters(ctx context.Context, rdb redis.Cmdable, skus []string) ([]Counters, error) {
	pipe := rdb.Pipeline()
	gets := make([]*redis.SliceCmd, len(skus))
	lens := make([]*redis.IntCmd, len(skus))
	for i, sku := range skus {
		gets[i] = pipe.MGet(ctx, keys.Stock(sku), keys.Avail(sku), keys.Sold(sku))
		lens[i] = pipe.HLen(ctx, keys.Resv(sku))
	}
	if len(skus) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read stock counters of %d SKUs: %w", len(skus), err)
		}
	}
	out := make([]Counters, len(skus))
	for i, sku := range skus {
		c, err := counters(sku, gets[i].Val(), lens[i].Val())
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func counters(sku string, vals []any, holds int64) (Counters, error) {
	c := Counters{SKU: sku, Holds: int(holds)}
	if len(vals) != 3 {
		return c, fmt.Errorf("read stock counters sku=%s: unexpected reply %v", sku, vals)
	}
	for i, p := range []*int{&c.Stock, &c.Avail, &c.Sold} {
		s, ok := vals[i].(string)
		if !ok {
			continue // missing key
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return c, fmt.Errorf("read stock counters sku=%s: field %d: %w", sku, i, err)
		}
		*p = n
	}
	_, c.Loaded = vals[1].(string)
	if c.Loaded {
		c.Reserved = c.Stock - c.Avail - c.Sold
	}
	return c, nil
}
