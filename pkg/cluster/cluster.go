// Package cluster builds the Redis Cluster client every surge service uses,
// tuned to ride through a failover: short timeouts so in-flight requests
// fail instead of hanging, and a cluster-state reload on network errors and
// on a short interval, so writes reach a promoted replica within a couple
// of seconds (go-redis's defaults took about a minute here).
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configures the client. The zero value of each field means its
// default.
type Options struct {
	// Addrs are the seed nodes. Default 127.0.0.1:7000-7005.
	Addrs []string
	// Username and Password authenticate every connection. Default: no
	// username (the default user), password "surge".
	Username, Password string
	// DialTimeout, ReadTimeout and WriteTimeout default to 500ms: every
	// command surge sends takes well under a millisecond, and a command
	// stuck on a paused master is tried 4 times before its request fails
	// (about 2.5s in all; with 1s it was 4.5s per command).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// PoolSize per node; default 10 per CPU (go-redis's default).
	PoolSize int
	// ReloadInterval is how often the slot map is refreshed in the
	// background. Default 1s; negative disables it.
	ReloadInterval time.Duration
	// AutoPipeline makes Batched return go-redis's autopipeliner: the
	// commands that concurrent callers send to one master in the same
	// moment go out as one pipeline, one write and one read instead of one
	// round trip each. Without it Batched returns the plain client.
	AutoPipeline bool
	// TLS, when set, is used for every connection to every node. Default
	// nil: plain TCP.
	TLS *tls.Config
}

// DefaultAddrs are the local cluster's seed nodes.
var DefaultAddrs = []string{
	"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002",
	"127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005",
}

func (o *Options) setDefaults() {
	if len(o.Addrs) == 0 {
		o.Addrs = DefaultAddrs
	}
	if o.Password == "" {
		o.Password = "surge"
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 500 * time.Millisecond
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 500 * time.Millisecond
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 500 * time.Millisecond
	}
	if o.ReloadInterval == 0 {
		o.ReloadInterval = time.Second
	}
}

// Client is a ClusterClient plus the goroutine that keeps its slot map
// fresh. Close stops both.
type Client struct {
	*redis.ClusterClient
	stop chan struct{}
	auto bool
}

// New returns a tuned cluster client. It does not dial: the first command
// (or Ping) does.
func New(opts Options) *Client {
	opts.setDefaults()
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        opts.Addrs,
		Username:     opts.Username,
		Password:     opts.Password,
		DialTimeout:  opts.DialTimeout,
		ReadTimeout:  opts.ReadTimeout,
		WriteTimeout: opts.WriteTimeout,
		PoolSize:     opts.PoolSize,
		TLSConfig:    opts.TLS,
		// Retries happen once, at the cluster level: MaxRedirects bounds
		// the attempts of a command, each after a backoff and with the
		// node looked up again in the (reloaded) slot map, so a retry can
		// reach a promoted replica. Retrying on the same node as well
		// (MaxRetries) multiplied the attempts against a dead or paused
		// master: gateway requests took up to 9s to answer 503 in a
		// failover. The scripts are idempotent per order id, so a retried
		// script is safe.
		MaxRetries:      -1,
		MaxRedirects:    3,
		MinRetryBackoff: 50 * time.Millisecond,
		MaxRetryBackoff: 500 * time.Millisecond,
		// One dial per attempt: a dead master refuses at once, and
		// go-redis's default of 5 dials 100ms apart only delays the answer.
		DialerRetries: 1,
		// Each node's client says which setting fixes a TLS handshake
		// that failed (explainTLS): the cluster client's own hooks do
		// not see the nodes' dials.
		NewClient: func(o *redis.Options) *redis.Client {
			n := redis.NewClient(o)
			n.AddHook(tlsHint{})
			return n
		},
	})
	c := &Client{ClusterClient: rc, stop: make(chan struct{}), auto: opts.AutoPipeline}
	rc.AddHook(&reloadHook{c: rc})
	if opts.ReloadInterval > 0 {
		go c.reloadLoop(opts.ReloadInterval)
	}
	return c
}

func (c *Client) reloadLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.ReloadState(context.Background())
		}
	}
}

// Batched returns the handle for the hot paths (the order scripts, locks,
// cache reads): with Options.AutoPipeline, the client's autopipeliner,
// which blocks each caller until its own command has run, as the plain
// client does, while batching concurrent callers per master; otherwise the
// plain client. Commands keep their order per key. The autopipeliner is
// made once and closed with the client.
func (c *Client) Batched() (redis.Cmdable, error) {
	if !c.auto {
		return c.ClusterClient, nil
	}
	ap, err := c.AutoPipeline()
	if err != nil {
		return nil, fmt.Errorf("redis autopipeline: %w", err)
	}
	return ap, nil
}

// Close stops the reload loop and closes the client.
func (c *Client) Close() error {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	return c.ClusterClient.Close()
}

// Ready checks that every master answers and the cluster state is ok.
func (c *Client) Ready(ctx context.Context) error {
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.Ping(ctx).Err()
	})
	if err != nil {
		return err
	}
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	return nil
}

// reloadHook asks for a slot-map reload (at most every 200ms) when a
// command fails in a way a failover causes: a dead node, a timeout,
// CLUSTERDOWN or a read-only replica answering for a lost master.
type reloadHook struct {
	c    *redis.ClusterClient
	last atomic.Int64
}

func (h *reloadHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			h.reload()
		}
		return conn, err
	}
}

func (h *reloadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if failoverSymptom(err) {
			h.reload()
		}
		return err
	}
}

func (h *reloadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if failoverSymptom(err) {
			h.reload()
		}
		return err
	}
}

func (h *reloadHook) reload() {
	now := time.Now().UnixMilli()
	last := h.last.Load()
	if now-last < 200 || !h.last.CompareAndSwap(last, now) {
		return
	}
	go h.c.ReloadState(context.Background())
}

// tlsHint is a node client's hook that explains TLS handshake failures.
type tlsHint struct{}

func (tlsHint) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		return conn, explainTLS(err)
	}
}

func (tlsHint) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (tlsHint) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// explainTLS adds to a TLS handshake failure which setting fixes it: the
// bare x509 messages leave an operator guessing.
func explainTLS(err error) error {
	if err == nil {
		return nil
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w (the node's certificate is not signed by a CA this client trusts: "+
			"SURGE_REDIS_TLS_CA_FILE must name the CA that signed the nodes' certificates)", err)
	case errors.As(err, &hostname):
		return fmt.Errorf("%w (the node's certificate does not name the address it was dialled on: "+
			"put that address in the certificate, or set SURGE_REDIS_TLS_SERVER_NAME to a name it carries)", err)
	}
	return err
}

func failoverSymptom(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	s := err.Error()
	return strings.HasPrefix(s, "CLUSTERDOWN") || strings.HasPrefix(s, "READONLY") ||
		strings.Contains(s, "connection refused") || strings.Contains(s, "EOF") ||
		strings.HasPrefix(s, "TRYAGAIN")
}
