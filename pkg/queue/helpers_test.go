package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/order"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// dialTest connects to the test broker (or skips) and closes at cleanup.
func dialTest(t testing.TB, url string) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := Dial(ctx, url, DialOptions{Logger: quiet, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// testTopology declares a topology with unique names and 200ms/400ms
// tiers, deleted at cleanup; edit adjusts it first.
func testTopology(t testing.TB, conn *Conn, edit ...func(*Topology)) Topology {
	t.Helper()
	p := testenv.Unique("t") + "."
	topo := Topology{
		Exchange:      p + "orders",
		Queue:         p + "orders.created",
		DeadExchange:  p + "orders.dlx",
		DeadQueue:     p + "orders.dead",
		RetryExchange: p + "orders.retry",
		RetryDelays:   []time.Duration{200 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, e := range edit {
		e(&topo)
	}
	topo = NewTopology(topo)
	withChannel(t, conn, func(ch *amqp.Channel) {
		if err := topo.Declare(ch); err != nil {
			t.Fatalf("declare: %v", err)
		}
	})
	t.Cleanup(func() {
		withChannel(t, conn, func(ch *amqp.Channel) {
			if err := topo.Delete(ch); err != nil {
				t.Errorf("delete topology: %v", err)
			}
		})
	})
	return topo
}

// withChannel runs fn on a fresh channel.
func withChannel(t testing.TB, conn *Conn, fn func(*amqp.Channel)) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	defer ch.Close()
	fn(ch)
}

func testOrder(i int) order.Order {
	return order.Order{ID: order.IDFor("c1", fmt.Sprint("key-", i), 0), SKU: "sku-1", Qty: 1 + i%5, CustomerID: "c1"}
}

func newTestPublisher(t testing.TB, conn *Conn, topo Topology, opts PublisherOptions) *Publisher {
	t.Helper()
	p, err := NewPublisher(conn, topo, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// runConsumer runs a consumer until the returned stop is called; stop
// waits for Run to return.
func runConsumer(t testing.TB, conn *Conn, topo Topology, opts ConsumerOptions, h Handler) (stop func()) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewConsumer(conn, topo, opts).Run(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("consumer run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// receive waits for the next value, failing the test after a generous
// deadline (a hang guard, not a speed assertion).
func receive[T any](t testing.TB, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(15 * time.Second):
		t.Fatal("nothing received within 15s")
		var zero T
		return zero
	}
}

// getOne takes one message from queue with basic.get and acks it.
func getOne(t testing.TB, conn *Conn, queue string) (amqp.Delivery, bool) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	d, ok, err := ch.Get(queue, true)
	if err != nil {
		t.Fatalf("get %s: %v", queue, err)
	}
	return d, ok
}

func depth(t testing.TB, conn *Conn, queue string) int {
	t.Helper()
	n, _, err := QueueDepth(context.Background(), conn, queue)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// proxy forwards TCP to the broker and can cut every connection, to
// simulate a broker restart without touching the shared broker.
type proxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    []net.Conn
	refuse   bool
}

func newProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut(false)
	})
	return p
}

func (p *proxy) url() string { return "amqp://guest:guest@" + p.ln.Addr().String() + "/" }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
	}
}

// cut closes every proxied connection; with refuse, new ones are closed
// at once until cut(false) is called.
func (p *proxy) cut(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func isUnavailable(err error) bool { return errors.Is(err, order.ErrUnavailable) }
