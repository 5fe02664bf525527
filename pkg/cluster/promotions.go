package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Promotions tells whether the master serving a key took over recently.
// Replication is asynchronous: a replica promoted after its master died
// may lack the writes the master acknowledged last (a reservation, an
// order's state), and what it says of an order is then not the last word
// until the orders those writes belonged to have settled. The gateway
// does not answer "not taken" from such a master's memory (Recent).
//
// It learns the masters from CLUSTER SLOTS, read every interval (Run):
// a node serving slots that the previous read did not see as a master
// took over at that read. The masters of the first successful read are
// taken as long established.
type Promotions struct {
	// Slots reads the slot map (CLUSTER SLOTS); MasterOf names the master
	// address serving a key from the client's own slot map.
	Slots    func(ctx context.Context) ([]redis.ClusterSlot, error)
	MasterOf func(ctx context.Context, key string) (string, error)
	// Window is how long a new master stays recent.
	Window time.Duration
	// Now defaults to time.Now.
	Now func() time.Time

	mu     sync.RWMutex
	looked bool
	since  map[string]time.Time // master address: took over then (zero: at the first read)
}

// NewPromotions watches c's masters; a master stays recent for window.
func NewPromotions(c *redis.ClusterClient, window time.Duration) *Promotions {
	return &Promotions{
		Slots: func(ctx context.Context) ([]redis.ClusterSlot, error) { return c.ClusterSlots(ctx).Result() },
		MasterOf: func(ctx context.Context, key string) (string, error) {
			n, err := c.MasterForKey(ctx, key)
			if err != nil {
				return "", err
			}
			return n.Options().Addr, nil
		},
		Window: window,
	}
}

// Recent tells whether key's master may lack writes its predecessor
// acknowledged: it took over less than Window ago, or it is not among
// the masters of the last read (it took over since), or the master
// cannot be named. Before the first successful read nothing is recent.
func (p *Promotions) Recent(ctx context.Context, key string) bool {
	if p == nil {
		return false
	}
	addr, err := p.MasterOf(ctx, key)
	p.mu.RLock()
	looked, since, known := p.looked, time.Time{}, false
	if err == nil {
		since, known = p.since[addr]
	}
	p.mu.RUnlock()
	switch {
	case !looked:
		return false
	case !known:
		return true
	}
	return !since.IsZero() && p.now().Sub(since) < p.Window
}

// Look reads the slot map once and records the masters that took over
// since the previous read.
func (p *Promotions) Look(ctx context.Context) error {
	slots, err := p.Slots(ctx)
	if err != nil {
		return err
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make(map[string]time.Time, len(slots))
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		addr := s.Nodes[0].Addr
		if _, seen := next[addr]; seen {
			continue
		}
		since, known := p.since[addr]
		switch {
		case known:
			next[addr] = since
		case p.looked:
			next[addr] = now
		default:
			next[addr] = time.Time{}
		}
	}
	p.since, p.looked = next, true
	return nil
}

// Run reads the slot map every interval until ctx ends; a failed read
// is logged (at most once a minute) and tried again at the next tick.
func (p *Promotions) Run(ctx context.Context, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	var logged time.Time
	for {
		if err := p.Look(ctx); err != nil && ctx.Err() == nil && time.Since(logged) > time.Minute {
			logged = time.Now()
			log.Warn("read the cluster's masters", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Promotions) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}
