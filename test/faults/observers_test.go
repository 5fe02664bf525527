//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// restocker raises a random SKU's stock by 3-12 units every 1.5-3s
// through a random gateway, until 5s before the end of the sale, so that
// there is something to sell while the faults come and go.
func (w *workload) restocker(ctx context.Context, dur time.Duration) {
	rng := w.rng(11)
	for {
		sleep(ctx, time.Duration(1500+rng.IntN(1500))*time.Millisecond)
		if ctx.Err() != nil || w.h.since() > dur-5*time.Second {
			return
		}
		sku := w.skus[rng.IntN(len(w.skus))]
		w.restock(sku, 3+rng.IntN(10), rng.IntN(len(w.p.urls)))
	}
}

// restock changes sku's stock by delta (down when negative) through
// gateway gw's admin API, one restock at a time, and records it. The
// stock the test keeps for the SKU follows only a restock answered 200.
func (w *workload) restock(sku string, delta, gw int) restock {
	w.restockMu.Lock()
	defer w.restockMu.Unlock()
	w.mu.Lock()
	target := max(w.stock[sku]+delta, 0)
	w.mu.Unlock()
	r := restock{At: w.h.since(), SKU: sku, Target: target, Via: fmt.Sprintf("gateway%d admin API", gw)}
	status, err := w.p.putStock(context.Background(), gw, sku, target)
	r.Done, r.Status = w.h.since(), status
	if err != nil {
		r.Err = err.Error()
	}
	if status == http.StatusOK {
		w.mu.Lock()
		w.stock[sku] = target
		w.mu.Unlock()
	}
	w.h.noteRestock(r)
	return r
}

// poller reads the status of orders answered 202, as a checkout page
// would, and notes what it saw.
func (w *workload) poller(ctx context.Context, i int) {
	rng := w.rng(uint64(20 + i))
	c := &http.Client{Timeout: 4 * time.Second}
	for ctx.Err() == nil {
		sleep(ctx, 150*time.Millisecond)
		ids := w.h.acceptedIDs()
		if len(ids) == 0 {
			continue
		}
		id := ids[rng.IntN(len(ids))]
		gw := rng.IntN(len(w.p.urls))
		resp, err := c.Get(w.p.urls[gw] + "/v1/orders/" + id)
		if err != nil {
			w.h.notePoll(id, "transport error", false)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var v struct {
			Status string `json:"status"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil {
			w.h.notePoll(id, fmt.Sprint(resp.StatusCode), false)
			continue
		}
		w.h.notePoll(id, v.Status, true)
	}
}

// sampler reads every SKU's avail in Redis every 50ms, so that a 409
// sold_out can be compared with what was there to sell.
func (w *workload) sampler(ctx context.Context) {
	for ctx.Err() == nil {
		for _, sku := range w.skus {
			rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			at := w.h.since()
			n, err := w.p.rdb.Get(rctx, "{sku:"+sku+"}:avail").Int()
			cancel()
			if err == nil {
				w.h.noteSample(sku, sample{At: at, Done: w.h.since(), Avail: n})
			}
		}
		sleep(ctx, 50*time.Millisecond)
	}
}
