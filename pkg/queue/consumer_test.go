package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/order"
)

type seenDelivery struct {
	attempts   int
	lastError  string
	first      time.Time
	last       time.Time
	messageID  string
	decodedErr error
}

func snapshot(d *Delivery) seenDelivery {
	_, err := d.Order()
	return seenDelivery{
		attempts:   d.Attempts(),
		lastError:  headerString(d.Headers, HeaderLastError),
		first:      headerTime(d.Headers, HeaderFirstFailure),
		last:       headerTime(d.Headers, HeaderLastFailure),
		messageID:  d.MessageID,
		decodedErr: err,
	}
}

func TestRetryComesBackThroughTier(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	o := testOrder(1)
	if err := pub.Publish(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	seen := make(chan seenDelivery, 2)
	runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		seen <- snapshot(d)
		if d.Attempts() == 0 {
			if err := d.Retry(errors.New("stock service timed out")); err != nil {
				t.Errorf("retry: %v", err)
			}
			return
		}
		if err := d.Ack(); err != nil {
			t.Errorf("ack: %v", err)
		}
	})
	first, second := receive(t, seen), receive(t, seen)
	if first.attempts != 0 {
		t.Errorf("first delivery attempts = %d, want 0", first.attempts)
	}
	if second.attempts != 1 || second.lastError != "stock service timed out" || second.messageID != o.ID {
		t.Errorf("retried delivery = %+v, want attempts 1, the last error and message id %s", second, o.ID)
	}
	if second.first.IsZero() || !second.first.Equal(second.last) {
		t.Errorf("failure times first=%v last=%v, want both set and equal after one failure", second.first, second.last)
	}
	if second.decodedErr != nil {
		t.Errorf("retried body no longer decodes: %v", second.decodedErr)
	}
	for _, q := range append(topo.RetryQueues(), topo.DeadQueue) {
		if n := depth(t, conn, q); n != 0 {
			t.Errorf("%s holds %d messages, want 0", q, n)
		}
	}
}

func TestExhaustedRetriesAreParked(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	o := testOrder(2)
	if err := pub.Publish(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	tiers := len(topo.RetryDelays)
	calls := make(chan int, tiers+2)
	stop := runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		calls <- d.Attempts()
		if err := d.Retry(fmt.Errorf("failure %d", d.Attempts()+1)); err != nil {
			t.Errorf("retry: %v", err)
		}
	})
	for want := 0; want <= tiers; want++ {
		if got := receive(t, calls); got != want {
			t.Fatalf("delivery %d has attempts %d", want, got)
		}
	}
	waitFor(t, func() bool { return depth(t, conn, topo.DeadQueue) == 1 })
	stop()
	if len(calls) != 0 {
		t.Errorf("%d deliveries after the message was parked", len(calls))
	}
	dead, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 {
		t.Fatalf("dead letters = %d, want 1", len(dead))
	}
	dl := dead[0]
	if dl.Reason != ReasonRetriesExhausted || dl.Attempts != tiers+1 || dl.OrderID != o.ID ||
		dl.LastError != fmt.Sprintf("failure %d", tiers+1) || dl.SKU != o.SKU {
		t.Errorf("dead letter = %+v", dl)
	}
	if _, err := ulid.ParseStrict(dl.ID); err != nil {
		t.Errorf("dead id %q is not a ULID: %v", dl.ID, err)
	}
	if !dl.LastFailure.After(dl.FirstFailure) {
		t.Errorf("last failure %v not after first %v", dl.LastFailure, dl.FirstFailure)
	}
}

func TestDeadParksWithReasonAndID(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	// A malformed body, as a buggy producer would send it.
	if err := pub.PublishRaw(context.Background(), topo.Exchange, topo.RoutingKey,
		amqp.Publishing{MessageId: "junk-1", Body: []byte(`{"sku": 12`)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	stop := runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		_, err := d.Order()
		if !errors.Is(err, order.ErrInvalid) {
			t.Errorf("decode malformed body = %v, want ErrInvalid", err)
		}
		done <- d.Dead(order.ReasonMalformed, err)
	})
	if err := receive(t, done); err != nil {
		t.Fatalf("dead: %v", err)
	}
	stop()
	dead, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 {
		t.Fatalf("dead letters = %d, want 1", len(dead))
	}
	dl := dead[0]
	if dl.Reason != order.ReasonMalformed || dl.Attempts != 1 || dl.OrderID != "junk-1" ||
		string(dl.Body) != `{"sku": 12` || dl.LastError == "" {
		t.Errorf("dead letter = %+v", dl)
	}
	if _, err := ulid.ParseStrict(dl.ID); err != nil {
		t.Errorf("dead id %q is not a ULID: %v", dl.ID, err)
	}
	if n := depth(t, conn, topo.Queue); n != 0 {
		t.Errorf("work queue holds %d messages, want 0", n)
	}
}

func TestPanicAndUnsettledAreRetried(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	if err := pub.Publish(context.Background(), testOrder(3)); err != nil {
		t.Fatal(err)
	}
	seen := make(chan seenDelivery, 3)
	runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		seen <- snapshot(d)
		switch d.Attempts() {
		case 0:
			panic("nil map somewhere")
		case 1:
			return // forgot to settle
		default:
			_ = d.Ack()
		}
	})
	receive(t, seen)
	afterPanic := receive(t, seen)
	afterReturn := receive(t, seen)
	if afterPanic.attempts != 1 || afterPanic.lastError != "handler panic: nil map somewhere" {
		t.Errorf("after panic: %+v", afterPanic)
	}
	if afterReturn.attempts != 2 || afterReturn.lastError != "handler returned without settling the delivery" {
		t.Errorf("after unsettled return: %+v", afterReturn)
	}
}

func TestGracefulStopFinishesInFlightHandler(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	if err := pub.Publish(context.Background(), testOrder(4)); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var completed, ctxErrSeen atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() {
		runDone <- NewConsumer(conn, topo, ConsumerOptions{Logger: quiet}).Run(ctx, func(hctx context.Context, d *Delivery) {
			close(started)
			<-release
			ctxErrSeen.Store(hctx.Err() != nil)
			if err := d.Ack(); err != nil {
				t.Errorf("ack after shutdown began: %v", err)
			}
			completed.Store(true)
		})
	}()
	receive(t, started)
	cancel()
	select {
	case <-runDone:
		t.Fatal("Run returned while a handler was still running")
	default:
	}
	close(release)
	if err := receive(t, runDone); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !completed.Load() {
		t.Error("Run returned before the handler completed")
	}
	if ctxErrSeen.Load() {
		t.Error("handler context was cancelled during the drain")
	}
	if n := depth(t, conn, topo.Queue); n != 0 {
		t.Errorf("work queue holds %d messages, want 0 (the in-flight ack went through)", n)
	}
}

func TestConsumerResubscribesAfterConnectionLoss(t *testing.T) {
	url := testenv.AMQPURL(t)
	conn := dialTest(t, url)
	topo := testTopology(t, conn)
	uri, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, fmt.Sprintf("%s:%d", uri.Host, uri.Port))
	viaProxy := dialTest(t, px.url())
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	got := make(chan string, 4)
	runConsumer(t, viaProxy, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(); err == nil {
			got <- d.MessageID
		}
	})
	if err := pub.Publish(context.Background(), testOrder(1)); err != nil {
		t.Fatal(err)
	}
	if id := receive(t, got); id != testOrder(1).ID {
		t.Fatalf("got %s", id)
	}
	px.cut(false)
	if err := pub.Publish(context.Background(), testOrder(2)); err != nil {
		t.Fatal(err)
	}
	// Order 1 may come again: its ack can die with the connection.
	for id := receive(t, got); id != testOrder(2).ID; id = receive(t, got) {
		if id != testOrder(1).ID {
			t.Fatalf("after reconnect got %s, want order 2", id)
		}
	}
}

func TestRunReturnsOnceConnIsClosed(t *testing.T) {
	url := testenv.AMQPURL(t)
	topo := testTopology(t, dialTest(t, url))
	conn := dialTest(t, url)
	done := make(chan error, 1)
	go func() {
		done <- NewConsumer(conn, topo, ConsumerOptions{Logger: quiet}).Run(context.Background(),
			func(ctx context.Context, d *Delivery) { _ = d.Ack() })
	}()
	waitFor(t, func() bool {
		_, consumers, err := QueueDepth(context.Background(), conn, topo.Queue)
		return err == nil && consumers == 1
	})
	_ = conn.Close()
	if err := receive(t, done); !errors.Is(err, ErrClosed) {
		t.Errorf("run after close = %v, want ErrClosed", err)
	}
}

// TestHealthFailsWhileNotConsuming: Health passes while the consumer is subscribed, fails
// once its subscription is gone for longer than allowed (here: the broker cancelled it by
// deleting the queue, and every re-subscription is refused), and passes again once Run has
// re-subscribed by itself.
func TestHealthFailsWhileNotConsuming(t *testing.T) {
	url := testenv.AMQPURL(t)
	conn := dialTest(t, url)
	topo := testTopology(t, conn)
	cons := NewConsumer(conn, topo, ConsumerOptions{Logger: quiet})
	const maxDown = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx, func(ctx context.Context, d *Delivery) { _ = d.Ack() }) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor(t, func() bool { return cons.subscribed.Load() && cons.Health(maxDown) == nil })
	withChannel(t, conn, func(ch *amqp.Channel) {
		if _, err := ch.QueueDelete(topo.Queue, false, false, false); err != nil {
			t.Fatalf("delete %s: %v", topo.Queue, err)
		}
	})
	waitFor(t, func() bool { return errors.Is(cons.Health(maxDown), ErrNotConsuming) })
	if err := cons.Health(time.Hour); err != nil {
		t.Errorf("Health(1h) = %v: a gap shorter than allowed must pass", err)
	}
	withChannel(t, conn, func(ch *amqp.Channel) {
		if err := topo.Declare(ch); err != nil {
			t.Fatalf("declare again: %v", err)
		}
	})
	waitFor(t, func() bool { return cons.Health(maxDown) == nil })
}

// TestHealthBeforeTheFirstSubscription: a consumer that never subscribed counts as down since
// it was built.
func TestHealthBeforeTheFirstSubscription(t *testing.T) {
	now := time.Unix(1000, 0)
	cons := NewConsumer(nil, Topology{Queue: "q"}, ConsumerOptions{Now: func() time.Time { return now }})
	if err := cons.Health(time.Minute); err != nil {
		t.Fatalf("just built: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if err := cons.Health(time.Minute); !errors.Is(err, ErrNotConsuming) || !strings.Contains(err.Error(), "q") {
		t.Fatalf("two minutes without a subscription: %v, want ErrNotConsuming naming the queue", err)
	}
}
