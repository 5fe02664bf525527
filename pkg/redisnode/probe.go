package redisnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configures a Prober. The zero value means the defaults.
type Options struct {
	// Username and Password authenticate every connection (the surge-ops
	// user, or the default user).
	Username, Password string
	// Timeout bounds each dial and reply. Default 2s (also for a negative
	// value).
	Timeout time.Duration
	// TLS, when set, is used for every connection. Default nil: plain TCP.
	TLS *tls.Config
}

// Prober talks to cluster nodes one by one, each through its own small
// client kept between calls: a node that is down must not hide the others,
// which a cluster client routing by slot would.
type Prober struct {
	opts    Options
	mu      sync.Mutex
	clients map[string]*redis.Client
}

func (o *Options) setDefaults() {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
}

// NewProber returns a Prober; it dials nothing until asked.
func NewProber(opts Options) *Prober {
	opts.setDefaults()
	return &Prober{opts: opts, clients: map[string]*redis.Client{}}
}

// Client returns the prober's client of addr.
func (p *Prober) Client(addr string) *redis.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[addr]
	if !ok {
		c = redis.NewClient(&redis.Options{
			Addr: addr, Username: p.opts.Username, Password: p.opts.Password,
			DialTimeout: p.opts.Timeout, ReadTimeout: p.opts.Timeout, WriteTimeout: p.opts.Timeout,
			PoolSize: 2, MaxRetries: -1, DisableIdentity: true, TLSConfig: p.opts.TLS,
			// One dial per call: a node that is down answers "down" now,
			// not after go-redis's five attempts.
			DialerRetries: 1,
		})
		p.clients[addr] = c
	}
	return c
}

// Close closes every client.
func (p *Prober) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for addr, c := range p.clients {
		errs = append(errs, c.Close())
		delete(p.clients, addr)
	}
	return errors.Join(errs...)
}

// Topology asks the given addresses in turn for CLUSTER NODES and returns
// the first answer.
func (p *Prober) Topology(ctx context.Context, addrs []string) ([]Node, error) {
	var errs []error
	for _, addr := range addrs {
		reply, err := p.Client(addr).ClusterNodes(ctx).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		return ParseClusterNodes(reply)
	}
	return nil, fmt.Errorf("cluster nodes: no node answered: %w", errors.Join(errs...))
}

// Snapshot is what one node said about itself.
type Snapshot struct {
	Addr string
	// Err is set when the node did not answer; the maps are then empty.
	Err     error
	Info    map[string]string // INFO (default sections)
	Cluster map[string]string // CLUSTER INFO
	Config  map[string]string // the CONFIG GET parameters asked for
	// ConfigErr is set when CONFIG GET was refused (a user without
	// config|get) or failed; Info and Cluster are still valid.
	ConfigErr error
}

// Snapshot reads addr's INFO, CLUSTER INFO and the named configuration
// parameters (CONFIG GET needs a user allowed config|get).
func (p *Prober) Snapshot(ctx context.Context, addr string, config ...string) Snapshot {
	s := Snapshot{Addr: addr, Info: map[string]string{}, Cluster: map[string]string{}, Config: map[string]string{}}
	c := p.Client(addr)
	info, err := c.Info(ctx).Result()
	if err != nil {
		s.Err = fmt.Errorf("info %s: %w", addr, err)
		return s
	}
	s.Info = ParseInfo(info)
	ci, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		s.Err = fmt.Errorf("cluster info %s: %w", addr, err)
		return s
	}
	s.Cluster = ParseInfo(ci)
	for _, key := range config {
		kv, err := c.ConfigGet(ctx, key).Result()
		if err != nil {
			s.ConfigErr = fmt.Errorf("config get %s on %s: %w", key, addr, err)
			return s
		}
		for k, v := range kv {
			s.Config[k] = v
		}
	}
	return s
}

// SnapshotAll reads every address concurrently, in the given order.
func (p *Prober) SnapshotAll(ctx context.Context, addrs []string, config ...string) []Snapshot {
	out := make([]Snapshot, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = p.Snapshot(ctx, addr, config...)
		}()
	}
	wg.Wait()
	return out
}

// Addrs lists the addresses of nodes, skipping those without one.
func Addrs(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if n.Addr != "" {
			out = append(out, n.Addr)
		}
	}
	return out
}
