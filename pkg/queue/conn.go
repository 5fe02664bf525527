package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// ErrClosed means the Conn was closed by its owner; it comes wrapped
// together with order.ErrUnavailable.
var ErrClosed = errors.New("rabbitmq connection closed")

// Conn is a RabbitMQ connection that redials in the background, with
// backoff, whenever the broker closes it. amqp091-go does not reconnect
// by itself (its opt-in Recovery gives up after a few attempts and
// silently revives channels whose outstanding confirms were lost), so
// Conn hands out plain channels and its users open new ones after a
// close: the Publisher and Consumer of this package do.
type Conn struct {
	// urls are the broker's nodes; dials go to urls[next], and move on
	// to the following node after a failed dial or a lost connection.
	urls []string
	next int // used by one dial at a time: Dial, then keepUp's redial
	opts DialOptions

	mu     sync.Mutex
	cur    *amqp.Connection // nil while disconnected
	up     chan struct{}    // closed while cur is set
	closed bool

	// blockedOn is the connection the broker blocked (connection.blocked,
	// sent when a resource alarm stops publishers), nil when none is.
	blockedOn atomic.Pointer[amqp.Connection]

	deadMu sync.Mutex // serialises dead-letter operations on this Conn
	quit   chan struct{}
	wg     sync.WaitGroup
}

// DialOptions configures Dial. The zero value means the defaults.
type DialOptions struct {
	// Name is the connection name shown in the management UI. Default
	// "surge".
	Name string
	// DialTimeout bounds one TCP connect plus AMQP handshake. Default 5s.
	DialTimeout time.Duration
	// MinBackoff and MaxBackoff bound the redial backoff, which doubles
	// from MinBackoff up to MaxBackoff, with jitter. Default 100ms and 5s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Logger receives connection losses, restorations and the broker's
	// flow control. Default slog.Default().
	Logger *slog.Logger
}

func (o *DialOptions) setDefaults() {
	if o.Name == "" {
		o.Name = "surge"
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Dial connects to url once, then keeps the connection up until Close.
// url may name several nodes of one cluster, comma-separated (see
// SplitURLs): the first attempt tries each in turn, and a lost connection
// is redialed to the next one, so a client follows the cluster when the
// node it used goes away. When every first attempt fails (within ctx and
// the dial timeout) it returns an error wrapping order.ErrUnavailable.
func Dial(ctx context.Context, url string, opts DialOptions) (*Conn, error) {
	opts.setDefaults()
	c := &Conn{urls: SplitURLs(url), opts: opts, up: make(chan struct{}), quit: make(chan struct{})}
	if len(c.urls) == 0 {
		return nil, fmt.Errorf("dial rabbitmq: %w: no URL", order.ErrUnavailable)
	}
	var conn *amqp.Connection
	var errs []error
	for range c.urls {
		var err error
		if conn, err = c.dial(ctx); err == nil {
			break
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if conn == nil {
		return nil, fmt.Errorf("dial rabbitmq: %w: %w", order.ErrUnavailable, errors.Join(errs...))
	}
	c.setConn(conn) // usable as soon as Dial returns
	c.wg.Add(1)
	go c.keepUp(conn)
	return c, nil
}

// SplitURLs splits SURGE_AMQP_URL's comma-separated list of the nodes of
// one cluster, dropping empty entries.
func SplitURLs(s string) []string {
	var urls []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// dial makes one connection attempt to the current node, abandoned when
// ctx ends; a failure moves on to the next node.
func (c *Conn) dial(ctx context.Context) (conn *amqp.Connection, err error) {
	url := c.urls[c.next]
	defer func() {
		if err != nil {
			c.next = (c.next + 1) % len(c.urls)
			err = fmt.Errorf("%s: %w", brokerHost(url), err)
		}
	}()
	type result struct {
		conn *amqp.Connection
		err  error
	}
	res := make(chan result, 1)
	go func() {
		cfg := amqp.Config{
			Dial:       amqp.DefaultDial(c.opts.DialTimeout),
			Heartbeat:  10 * time.Second,
			Properties: amqp.Table{"connection_name": c.opts.Name},
		}
		conn, err := amqp.DialConfig(url, cfg)
		res <- result{conn, err}
	}()
	select {
	case r := <-res:
		return r.conn, r.err
	case <-ctx.Done():
		go func() {
			if r := <-res; r.conn != nil {
				_ = r.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// keepUp publishes conn, waits for it to close, and redials until Close.
func (c *Conn) keepUp(conn *amqp.Connection) {
	defer c.wg.Done()
	for conn != nil {
		closed := conn.NotifyClose(make(chan *amqp.Error, 1))
		go c.watchBlocked(conn, conn.NotifyBlocked(make(chan amqp.Blocking, 4)))
		if !c.setConn(conn) {
			_ = conn.Close()
			return
		}
		select {
		case <-c.quit:
			return
		case err := <-closed:
			if !c.setConn(nil) {
				return
			}
			c.opts.Logger.Warn("rabbitmq connection lost", "node", brokerHost(c.urls[c.next]), "error", err)
			// The node may be gone: try the next one first.
			c.next = (c.next + 1) % len(c.urls)
		}
		conn = c.redial()
	}
}

// watchBlocked follows the broker's flow control on conn until the
// library closes blocks with the connection.
func (c *Conn) watchBlocked(conn *amqp.Connection, blocks <-chan amqp.Blocking) {
	for b := range blocks {
		if b.Active {
			c.blockedOn.Store(conn)
			c.opts.Logger.Warn("rabbitmq blocks publishers", "reason", b.Reason)
			continue
		}
		if c.blockedOn.CompareAndSwap(conn, nil) {
			c.opts.Logger.Info("rabbitmq unblocked publishers")
		}
	}
	c.blockedOn.CompareAndSwap(conn, nil)
}

// Blocked reports whether the broker currently blocks publishers on this
// connection (a memory or disk alarm): a message written now would wait,
// unconfirmed, until the alarm lifts.
func (c *Conn) Blocked() bool {
	b := c.blockedOn.Load()
	if b == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return b == c.cur
}

// setConn records the current connection (nil while down). It reports
// false once Close was called.
func (c *Conn) setConn(conn *amqp.Connection) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if conn != nil && c.cur == nil {
		close(c.up)
	}
	if conn == nil && c.cur != nil {
		c.up = make(chan struct{})
	}
	c.cur = conn
	return true
}

// redial retries with exponential backoff and jitter; nil means Close.
func (c *Conn) redial() *amqp.Connection {
	backoff := c.opts.MinBackoff
	for {
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-c.quit:
			return nil
		case <-time.After(wait):
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-c.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		conn, err := c.dial(ctx)
		cancel()
		if err == nil {
			c.opts.Logger.Info("rabbitmq connection restored", "node", brokerHost(c.urls[c.next]))
			return conn
		}
		c.opts.Logger.Warn("rabbitmq redial failed", "error", err, "next_in", backoff)
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

// Channel opens a channel on the current connection. While the broker is
// unreachable it fails at once with an error wrapping order.ErrUnavailable.
func (c *Conn) Channel() (*amqp.Channel, error) {
	c.mu.Lock()
	conn, closed := c.cur, c.closed
	c.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("open channel: %w: %w", order.ErrUnavailable, ErrClosed)
	}
	if conn == nil {
		return nil, fmt.Errorf("open channel: %w: not connected to rabbitmq", order.ErrUnavailable)
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w: %w", order.ErrUnavailable, err)
	}
	return ch, nil
}

// awaitChannel waits until a channel can be opened, or ctx ends.
func (c *Conn) awaitChannel(ctx context.Context) (*amqp.Channel, error) {
	for {
		ch, err := c.Channel()
		if err == nil {
			return ch, nil
		}
		c.mu.Lock()
		up, closed := c.up, c.closed
		c.mu.Unlock()
		if closed {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), err)
		case <-up:
			// Connected, yet the channel failed: the connection is dying.
			// Wait for keepUp to notice instead of spinning.
			select {
			case <-ctx.Done():
			case <-time.After(c.opts.MinBackoff):
			}
		}
	}
}

// Ready reports whether a connection is currently up.
func (c *Conn) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil && !c.cur.IsClosed()
}

// Ping checks the broker answers by opening and closing a channel (one
// round trip each). It fails with an error wrapping order.ErrUnavailable.
func (c *Conn) Ping(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		ch, err := c.Channel()
		if err == nil {
			err = ch.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, order.ErrUnavailable) {
			err = fmt.Errorf("ping rabbitmq: %w: %w", order.ErrUnavailable, err)
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("ping rabbitmq: %w: %w", order.ErrUnavailable, ctx.Err())
	}
}

// Close stops redialing and closes the connection. Channels opened from
// it close too.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	conn := c.cur
	c.cur = nil
	close(c.quit)
	c.mu.Unlock()
	var err error
	if conn != nil {
		err = conn.Close()
	}
	c.wg.Wait()
	if err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("close rabbitmq connection: %w", err)
	}
	return nil
}

// brokerHost is the host:port of an AMQP URL, without the credentials.
func brokerHost(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return "rabbitmq"
}
