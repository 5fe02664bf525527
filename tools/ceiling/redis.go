package ceiling

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/lua"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// RedisOptions tune the EVALSHA ceiling. The zero value means the
// defaults.
type RedisOptions struct {
	// SKU is the one key set reserved from; it is deleted afterwards.
	// Required: use a name no one else uses.
	SKU string
	// Workers is the number of concurrent callers. Default 64.
	Workers int
	// Duration of the measurement. Default 3s.
	Duration time.Duration
	// StateTTL is the lifetime of the per-order state each reservation
	// leaves. Default 1m, so a benchmark does not fill the cluster.
	StateTTL time.Duration
	// Pipeline > 1 sends that many EVALSHAs per round trip: the engine's
	// ceiling rather than one caller's. Default 1 (no pipelining).
	Pipeline int
}

func (o *RedisOptions) setDefaults() {
	if o.Workers == 0 {
		o.Workers = 64
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
	if o.StateTTL == 0 {
		o.StateTTL = time.Minute
	}
}

func (o RedisOptions) validate() error {
	if o.SKU == "" {
		return fmt.Errorf("redis ceiling: a SKU is required")
	}
	return nil
}

// RedisEvalsha measures the reserve script by EVALSHA on one SKU, each call
// a new order of one unit, from Workers callers each waiting for its
// answer (no pipelining): the ceiling of one gateway round trip per order
// to one hot master.
func RedisEvalsha(ctx context.Context, rdb *redis.ClusterClient, opts RedisOptions) (Result, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	if err := stock.LoadScripts(ctx, rdb); err != nil {
		return Result{}, fmt.Errorf("redis ceiling: %w", err)
	}
	st := stock.New(rdb, stock.Options{StateTTL: opts.StateTTL})
	if _, err := st.SetStock(ctx, opts.SKU, order.MaxStock, 0); err != nil {
		return Result{}, fmt.Errorf("redis ceiling: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		rdb.Del(cctx, keys.Avail(opts.SKU), keys.Resv(opts.SKU), keys.Sold(opts.SKU), keys.Stock(opts.SKU))
	}()
	if opts.Pipeline > 1 {
		return redisPipelined(ctx, rdb, opts)
	}
	res, err := drive(ctx, "redis_evalsha", opts.Workers, opts.Duration, func(ctx context.Context, w int, i int64) (int, error) {
		id := "c" + strconv.Itoa(w) + "-" + strconv.FormatInt(i, 10)
		if _, err := st.Reserve(ctx, order.Order{ID: id, SKU: opts.SKU, Qty: 1, CustomerID: "ceiling"}); err != nil {
			return 0, err
		}
		return 1, nil
	})
	res.Setup = fmt.Sprintf("reserve.lua by EVALSHA, one SKU, %d callers, no pipelining", opts.Workers)
	return res, err
}

// redisPipelined sends the reserve script in pipelines of opts.Pipeline.
func redisPipelined(ctx context.Context, rdb *redis.ClusterClient, opts RedisOptions) (Result, error) {
	ks := []string{keys.Avail(opts.SKU), keys.Resv(opts.SKU), ""}
	ttl := strconv.FormatInt(int64(opts.StateTTL/time.Second), 10)
	res, err := drive(ctx, "redis_evalsha_pipelined", opts.Workers, opts.Duration, func(ctx context.Context, w int, i int64) (int, error) {
		pipe := rdb.Pipeline()
		for j := range opts.Pipeline {
			id := "p" + strconv.Itoa(w) + "-" + strconv.FormatInt(i, 10) + "-" + strconv.Itoa(j)
			ks := append(ks[:2:2], keys.OrderState(opts.SKU, id), keys.Undone(opts.SKU, id),
				keys.MaxPerCustomer(opts.SKU), keys.CustomerUnits(opts.SKU, "ceiling"))
			// ARGV as stock.Reserve sends them: id, qty, nonce, customer, TTL,
			// a new claim.
			pipe.EvalSha(ctx, lua.Reserve.Hash(), ks, id, 1, "00000000", "ceiling", ttl, "1")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, fmt.Errorf("pipelined reserve: %w", err)
		}
		return opts.Pipeline, nil
	})
	res.Setup = fmt.Sprintf("reserve.lua by EVALSHA, one SKU, %d callers, pipelines of %d", opts.Workers, opts.Pipeline)
	return res, err
}
