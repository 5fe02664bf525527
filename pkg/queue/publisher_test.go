package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/order"
)

func TestPublishConsumeRoundTrip(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})

	want := testOrder(1)
	if err := pub.Publish(context.Background(), want); err != nil {
		t.Fatalf("publish: %v", err)
	}
	type got struct {
		o        order.Order
		err      error
		attempts int
		msgID    string
	}
	out := make(chan got, 1)
	runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		o, err := d.Order()
		out <- got{o, err, d.Attempts(), d.MessageID}
		if err := d.Ack(); err != nil {
			t.Errorf("ack: %v", err)
		}
		if err := d.Ack(); !errors.Is(err, ErrAlreadySettled) {
			t.Errorf("second ack = %v, want ErrAlreadySettled", err)
		}
	})
	g := receive(t, out)
	if g.err != nil {
		t.Fatalf("decode: %v", g.err)
	}
	if diff := cmp.Diff(want, g.o); diff != "" {
		t.Errorf("order (-sent +received):\n%s", diff)
	}
	if g.attempts != 0 || g.msgID != want.ID {
		t.Errorf("attempts=%d message id=%q, want 0 and %q", g.attempts, g.msgID, want.ID)
	}
}

func TestPublishRejectsInvalidOrder(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	o := testOrder(1)
	o.Qty = 0
	if err := pub.Publish(context.Background(), o); !errors.Is(err, order.ErrInvalid) {
		t.Fatalf("publish qty 0 = %v, want ErrInvalid", err)
	}
	if n := depth(t, conn, topo.Queue); n != 0 {
		t.Errorf("work queue holds %d messages, want 0", n)
	}
}

func TestPublishUnroutableIsUnavailable(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	lonely := testenv.Unique("t.lonely.")
	withChannel(t, conn, func(ch *amqp.Channel) {
		if err := ch.ExchangeDeclare(lonely, "topic", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() {
		withChannel(t, conn, func(ch *amqp.Channel) { _ = ch.ExchangeDelete(lonely, false, false) })
	})

	// Two publishers on purpose: one whose exchange has no queue, one
	// sharing nothing with it, to show a return is not mistaken for
	// another publish's outcome.
	bad := newTestPublisher(t, conn, Topology{Exchange: lonely}, PublisherOptions{Channels: 1})
	err := bad.Publish(context.Background(), testOrder(1))
	if !isUnavailable(err) || !strings.Contains(err.Error(), "unroutable") {
		t.Fatalf("publish to an unbound exchange = %v, want ErrUnavailable (unroutable)", err)
	}
	// The same channel stays usable, and a routable publish of the same
	// message id is not confused with the earlier return.
	if err := bad.PublishRaw(context.Background(), topo.Exchange, topo.RoutingKey,
		amqp.Publishing{MessageId: testOrder(1).ID, Body: []byte("{}")}); err != nil {
		t.Fatalf("routable publish after a return: %v", err)
	}
	if n := depth(t, conn, topo.Queue); n != 1 {
		t.Errorf("work queue holds %d messages, want 1", n)
	}
}

// TestPublishMissingExchangeIsNotConfirmed: the broker closes the channel
// on a publish to a missing exchange. The close names no message, and
// other publishes outstanding on that channel may have been enqueued, so
// the outcome is unknown, never "not taken".
func TestPublishMissingExchangeIsNotConfirmed(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	pub := newTestPublisher(t, conn, Topology{Exchange: testenv.Unique("t.missing.")}, PublisherOptions{Channels: 1})
	for i := range 2 { // the broken channel is replaced, the error stays
		err := pub.Publish(context.Background(), testOrder(i))
		if !errors.Is(err, order.ErrOutcomeUnknown) || !errors.Is(err, ErrConfirmLost) || isUnavailable(err) {
			t.Fatalf("publish %d to a missing exchange = %v, want an unknown outcome (channel lost)", i, err)
		}
	}
}

func TestDialUnreachableIsUnavailable(t *testing.T) {
	// A port nothing listens on: bind one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "amqp://guest:guest@" + ln.Addr().String() + "/"
	_ = ln.Close()
	_, err = Dial(context.Background(), url, DialOptions{Logger: quiet, DialTimeout: time.Second})
	if !isUnavailable(err) {
		t.Fatalf("dial closed port = %v, want ErrUnavailable", err)
	}
}

func TestPublishWhileBrokerDownIsUnavailable(t *testing.T) {
	url := testenv.AMQPURL(t)
	conn := dialTest(t, url)
	topo := testTopology(t, conn)
	uri, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, fmt.Sprintf("%s:%d", uri.Host, uri.Port))
	viaProxy := dialTest(t, px.url())
	pub := newTestPublisher(t, viaProxy, topo, PublisherOptions{Channels: 2})
	if err := pub.Publish(context.Background(), testOrder(1)); err != nil {
		t.Fatalf("publish before the cut: %v", err)
	}

	px.cut(true)
	waitFor(t, func() bool { return !viaProxy.Ready() })
	if err := pub.Publish(context.Background(), testOrder(2)); !isUnavailable(err) {
		t.Fatalf("publish while down = %v, want ErrUnavailable", err)
	}
	if err := viaProxy.Ping(context.Background()); !isUnavailable(err) {
		t.Fatalf("ping while down = %v, want ErrUnavailable", err)
	}

	px.cut(false)
	waitFor(t, viaProxy.Ready)
	if err := pub.Publish(context.Background(), testOrder(3)); err != nil {
		t.Fatalf("publish after the redial: %v", err)
	}
	if n := depth(t, conn, topo.Queue); n != 2 {
		t.Errorf("work queue holds %d messages, want 2 (before and after the cut)", n)
	}
}

// waitFor polls cond until it holds, failing after a hang guard.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 15s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConcurrentPublishesConfirmedAndConsumedOnce(t *testing.T) {
	const n = 200
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{Channels: 4})

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- pub.Publish(context.Background(), testOrder(i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	}

	var mu sync.Mutex
	seen := map[string]int{}
	all := make(chan struct{})
	stop := runConsumer(t, conn, topo, ConsumerOptions{Prefetch: 32, Concurrency: 8}, func(ctx context.Context, d *Delivery) {
		o, err := d.Order()
		if err != nil {
			t.Errorf("decode: %v", err)
		}
		if err := d.Ack(); err != nil {
			t.Errorf("ack: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		seen[o.ID]++
		if len(seen) == n && seen[o.ID] == 1 {
			close(all)
		}
	})
	receive(t, all)
	stop()
	for i := range n {
		if c := seen[testOrder(i).ID]; c != 1 {
			t.Errorf("order %d consumed %d times", i, c)
		}
	}
	if d := depth(t, conn, topo.Queue); d != 0 {
		t.Errorf("work queue holds %d messages after consuming all, want 0", d)
	}
}

func TestPublishJSONBody(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	o := testOrder(7)
	if err := pub.Publish(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	d, ok := getOne(t, conn, topo.Queue)
	if !ok {
		t.Fatal("work queue is empty")
	}
	var body map[string]any
	if err := json.Unmarshal(d.Body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"order_id": o.ID, "sku": o.SKU, "qty": float64(o.Qty), "customer_id": o.CustomerID}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	if d.ContentType != ContentTypeJSON || d.DeliveryMode != amqp.Persistent || d.MessageId != o.ID {
		t.Errorf("properties: content type %q, delivery mode %d, message id %q",
			d.ContentType, d.DeliveryMode, d.MessageId)
	}
}

// TestWriteFailureClassified: a publish refused before it was written is
// certainly in no queue; a failed socket write may have sent the message
// whole (the connection's buffer is shared), so its outcome is unknown.
func TestWriteFailureClassified(t *testing.T) {
	for _, c := range []struct {
		err     error
		unknown bool
	}{
		{amqp.ErrClosed, false},
		{context.Canceled, false},
		{&net.OpError{Op: "write", Err: syscall.ECONNRESET}, true},
	} {
		err := writeFailed(c.err)
		if errors.Is(err, order.ErrOutcomeUnknown) != c.unknown || errors.Is(err, order.ErrUnavailable) == c.unknown {
			t.Errorf("%v classified as %v", c.err, err)
		}
	}
}
