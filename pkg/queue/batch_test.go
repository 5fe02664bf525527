package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/order"
)

// publishAll publishes n test orders at once and returns each one's error.
func publishAll(t testing.TB, pub *Publisher, n int) []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pub.Publish(context.Background(), testOrder(i))
		}()
	}
	wg.Wait()
	return errs
}

// drainOrders takes every message of queue and counts the orders they
// hold (a batch split as the consumer splits it), and the batches.
func drainOrders(t testing.TB, conn *Conn, queue string) (orders map[string]int, messages, batches int) {
	t.Helper()
	orders = map[string]int{}
	for {
		d, ok := getOne(t, conn, queue)
		if !ok {
			return orders, messages, batches
		}
		messages++
		if isBatch(d.ContentType) {
			batches++
		}
		for _, part := range deliveriesOf(d, nil) {
			o, err := part.Order()
			if err != nil {
				t.Fatalf("message %s: %v", d.MessageId, err)
			}
			if o.ID != part.MessageID {
				t.Errorf("order %s delivered as message id %s", o.ID, part.MessageID)
			}
			orders[o.ID]++
		}
	}
}

// boundQueue replaces topo's work queue by one that refuses (nacks)
// publishes once it holds max messages.
func boundQueue(t testing.TB, conn *Conn, topo Topology, max int) {
	t.Helper()
	withChannel(t, conn, func(ch *amqp.Channel) {
		if _, err := ch.QueueDelete(topo.Queue, false, false, false); err != nil {
			t.Fatal(err)
		}
		args := amqp.Table{"x-queue-type": "quorum", "x-max-length": int64(max), "x-overflow": "reject-publish"}
		if _, err := ch.QueueDeclare(topo.Queue, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(topo.Queue, topo.RoutingKey, topo.Exchange, false, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// TestConcurrentPublishesCoalesced: publishes that arrive while the
// window is full leave in fewer messages, and every order is confirmed and
// held exactly once, with one message in flight or several.
func TestConcurrentPublishesCoalesced(t *testing.T) {
	for _, inFlight := range []int{1, 8} {
		t.Run(fmt.Sprint("in flight ", inFlight), func(t *testing.T) {
			const n = 1000
			conn := dialTest(t, testenv.AMQPURL(t))
			topo := testTopology(t, conn)
			var mu sync.Mutex
			sent := map[string]int{}
			pub := newTestPublisher(t, conn, topo, PublisherOptions{InFlight: inFlight, Sent: func(orders int) {
				mu.Lock()
				defer mu.Unlock()
				sent["messages"]++
				sent["orders"] += orders
			}})
			for i, err := range publishAll(t, pub, n) {
				if err != nil {
					t.Fatalf("publish %d: %v", i, err)
				}
			}
			orders, messages, batches := drainOrders(t, conn, topo.Queue)
			mu.Lock()
			if sent["messages"] != messages || sent["orders"] != n {
				t.Errorf("Sent told of %d messages, %d orders; want %d, %d", sent["messages"], sent["orders"], messages, n)
			}
			mu.Unlock()
			for i := range n {
				if c := orders[testOrder(i).ID]; c != 1 {
					t.Errorf("order %d held %d times, want 1", i, c)
				}
			}
			if len(orders) != n || batches == 0 || messages >= n {
				t.Fatalf("%d orders in %d messages (%d batched), want %d orders in fewer messages", len(orders), messages, batches, n)
			}
			t.Logf("%d orders in %d messages", n, messages)
		})
	}
}

// TestPipelinedMessagesEachConfirmedOnce: the next message is written
// while earlier ones wait for their confirm. With the broker's confirms
// held back, the publisher fills its window (several messages written,
// none confirmed) and queues the rest; once the confirms come, every
// order's publish returns nil and the queue holds each order once.
func TestPipelinedMessagesEachConfirmedOnce(t *testing.T) {
	const n, window = 2000, 8
	setup := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, setup)
	conn, px := stallable(t)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{InFlight: window, ConfirmTimeout: time.Minute})
	if err := pub.Publish(context.Background(), testOrder(n)); err != nil { // opens a channel
		t.Fatalf("publish before the stall: %v", err)
	}
	px.Stall()
	t.Cleanup(px.Resume)
	errs := make(chan []error, 1)
	go func() { errs <- publishAll(t, pub, n) }()
	waitFor(t, func() bool {
		pub.co.mu.Lock()
		defer pub.co.mu.Unlock()
		return pub.co.inFlight == window && len(pub.co.queue) > 0
	})
	px.Resume()
	for i, err := range receive(t, errs) {
		if err != nil {
			t.Errorf("publish %d: %v", i, err)
		}
	}
	orders, messages, _ := drainOrders(t, setup, topo.Queue)
	for i := range n + 1 {
		if c := orders[testOrder(i).ID]; c != 1 {
			t.Errorf("order %d held %d times, want 1", i, c)
		}
	}
	if len(orders) != n+1 {
		t.Errorf("the queue holds %d orders, want %d", len(orders), n+1)
	}
	t.Logf("%d orders in %d messages", n+1, messages)
}

// TestNackFailsExactlyItsOrders: when the broker refuses some messages,
// an order's publish returns nil exactly when its order is in the queue,
// and the others fail as certainly not taken (nacked), never unknown,
// with one message in flight or several.
func TestNackFailsExactlyItsOrders(t *testing.T) {
	for _, inFlight := range []int{1, 8} {
		t.Run(fmt.Sprint("in flight ", inFlight), func(t *testing.T) {
			const n = 600 // more than 2 messages of MaxBatch can hold
			conn := dialTest(t, testenv.AMQPURL(t))
			topo := testTopology(t, conn)
			boundQueue(t, conn, topo, 2)
			pub := newTestPublisher(t, conn, topo, PublisherOptions{InFlight: inFlight})
			errs := publishAll(t, pub, n)
			orders, _, _ := drainOrders(t, conn, topo.Queue)
			confirmed, nacked := 0, 0
			for i, err := range errs {
				held := orders[testOrder(i).ID]
				switch {
				case err == nil && held == 1:
					confirmed++
				case err != nil && held == 0 && isUnavailable(err) && errors.Is(err, ErrNacked) &&
					!errors.Is(err, order.ErrOutcomeUnknown):
					nacked++
				default:
					t.Errorf("order %d: publish %v, held %d times", i, err, held)
				}
			}
			if confirmed == 0 || nacked == 0 {
				t.Fatalf("%d confirmed, %d nacked: want both", confirmed, nacked)
			}
		})
	}
}

// TestReturnFailsEveryOrderOfTheMessage: an unroutable batch fails each of
// its orders as returned, not taken, while a routable publisher sharing
// the connection has its own orders confirmed: a return is matched to its
// own message only.
func TestReturnFailsEveryOrderOfTheMessage(t *testing.T) {
	for _, inFlight := range []int{1, 8} {
		t.Run(fmt.Sprint("in flight ", inFlight), func(t *testing.T) {
			const n = 300
			conn := dialTest(t, testenv.AMQPURL(t))
			topo := testTopology(t, conn)
			lonely := topo
			lonely.RoutingKey = testenv.Unique("t.unbound.")
			bad := newTestPublisher(t, conn, lonely, PublisherOptions{InFlight: inFlight})
			good := newTestPublisher(t, conn, topo, PublisherOptions{InFlight: inFlight})
			var badErrs, goodErrs []error
			var wg sync.WaitGroup
			wg.Go(func() { badErrs = publishAll(t, bad, n) })
			wg.Go(func() { goodErrs = publishAll(t, good, n) })
			wg.Wait()
			for i, err := range badErrs {
				if !isUnavailable(err) || !errors.Is(err, ErrReturned) {
					t.Errorf("order %d: %v, want returned (unavailable)", i, err)
				}
			}
			for i, err := range goodErrs {
				if err != nil {
					t.Errorf("routable order %d: %v", i, err)
				}
			}
			orders, _, _ := drainOrders(t, conn, topo.Queue)
			if len(orders) != n {
				t.Errorf("work queue holds %d orders, want the routable %d", len(orders), n)
			}
		})
	}
}

// publishBatch publishes the orders as one batched message.
func publishBatch(t testing.TB, conn *Conn, topo Topology, exchange string, orders ...order.Order) string {
	t.Helper()
	var batch []*pendingPublish
	for _, o := range orders {
		batch = append(batch, &pendingPublish{id: o.ID, body: mustJSON(t, o),
			headers: amqp.Table{"traceparent": "00-" + o.ID}})
	}
	body, err := appendBatch(nil, batch)
	if err != nil {
		t.Fatal(err)
	}
	id := testenv.Unique("batch-")
	pub := newTestPublisher(t, conn, topo, PublisherOptions{Channels: 1})
	msg := amqp.Publishing{ContentType: ContentTypeOrders, DeliveryMode: amqp.Persistent, MessageId: id, Body: body}
	if err := pub.PublishRaw(context.Background(), exchange, topo.RoutingKey, msg); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestBatchSplitPoisonParkedAlone: each order of a batch is its own
// delivery; the one that fails is parked alone, as a single-order message,
// and the batch leaves the work queue once every order is settled.
func TestBatchSplitPoisonParkedAlone(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	orders := []order.Order{testOrder(1), testOrder(2), testOrder(3), testOrder(4)}
	poison := orders[2].ID
	publishBatch(t, conn, topo, topo.Exchange, orders...)

	var mu sync.Mutex
	seen := map[string]string{}
	all := make(chan struct{})
	stop := runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		o, err := d.Order()
		if err != nil {
			t.Errorf("decode %s: %v", d.MessageID, err)
		}
		var serr error
		if o.ID == poison {
			serr = d.Dead(order.ReasonMalformed, errors.New("poison"))
		} else {
			serr = d.Ack()
		}
		if serr != nil {
			t.Errorf("settle %s: %v", o.ID, serr)
		}
		mu.Lock()
		defer mu.Unlock()
		seen[d.MessageID] = headerString(d.Headers, "traceparent")
		if len(seen) == len(orders) {
			close(all)
		}
	})
	receive(t, all)
	stop()
	for _, o := range orders {
		if seen[o.ID] != "00-"+o.ID {
			t.Errorf("order %s delivered with trace header %q", o.ID, seen[o.ID])
		}
	}
	if d := depth(t, conn, topo.Queue); d != 0 {
		t.Errorf("work queue holds %d messages, want 0 (the batch acked)", d)
	}
	dead, ok := getOne(t, conn, topo.DeadQueue)
	if !ok || dead.MessageId != poison || dead.ContentType != ContentTypeJSON || headerString(dead.Headers, HeaderReason) != order.ReasonMalformed {
		t.Fatalf("dead letter %q (%s, reason %q), want %s alone", dead.MessageId, dead.ContentType, headerString(dead.Headers, HeaderReason), poison)
	}
	if more, ok := getOne(t, conn, topo.DeadQueue); ok {
		t.Errorf("a second dead letter %s", more.MessageId)
	}
}

// TestBatchRetryOfOneOrderTravelsAlone: a retried order comes back as a
// single-order message with its attempt counted; the others are not
// repeated.
func TestBatchRetryOfOneOrderTravelsAlone(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	orders := []order.Order{testOrder(1), testOrder(2), testOrder(3)}
	flaky := orders[0].ID
	publishBatch(t, conn, topo, topo.Exchange, orders...)

	var mu sync.Mutex
	seen := map[string][]int{}
	done := make(chan struct{})
	stop := runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		mu.Lock()
		seen[d.MessageID] = append(seen[d.MessageID], d.Attempts())
		first := len(seen[d.MessageID]) == 1
		mu.Unlock()
		if d.MessageID == flaky && first {
			if err := d.Retry(errors.New("transient")); err != nil {
				t.Errorf("retry: %v", err)
			}
			return
		}
		if err := d.Ack(); err != nil {
			t.Errorf("ack: %v", err)
		}
		if d.MessageID == flaky {
			close(done)
		}
	})
	receive(t, done)
	stop()
	want := map[string][]int{orders[0].ID: {0, 1}, orders[1].ID: {0}, orders[2].ID: {0}}
	for id, attempts := range want {
		if got := seen[id]; len(got) != len(attempts) || got[len(got)-1] != attempts[len(attempts)-1] {
			t.Errorf("order %s delivered with attempts %v, want %v", id, got, attempts)
		}
	}
	if d := depth(t, conn, topo.Queue); d != 0 {
		t.Errorf("work queue holds %d messages, want 0", d)
	}
}

// TestRedeliveredBatchSplitAgain: a batch whose consumer lost its
// connection before every order was settled comes back whole, redelivered,
// and is split again.
func TestRedeliveredBatchSplitAgain(t *testing.T) {
	url := testenv.AMQPURL(t)
	setup := dialTest(t, url)
	topo := testTopology(t, setup)
	orders := []order.Order{testOrder(1), testOrder(2), testOrder(3)}
	stuck := orders[1].ID
	publishBatch(t, setup, topo, topo.Exchange, orders...)

	px := newProxy(t, "127.0.0.1:5672")
	conn := dialTest(t, px.url())
	release := make(chan struct{})
	firstPass := make(chan string, len(orders))
	var mu sync.Mutex
	var redelivered []string
	all := make(chan struct{})
	var once sync.Once
	stop := runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		if !d.Redelivered {
			if d.MessageID == stuck {
				firstPass <- d.MessageID
				<-release // the connection is cut meanwhile
				_ = d.Ack()
				return
			}
			if err := d.Ack(); err != nil {
				t.Errorf("ack %s: %v", d.MessageID, err)
			}
			firstPass <- d.MessageID
			return
		}
		if err := d.Ack(); err != nil {
			t.Errorf("ack redelivered %s: %v", d.MessageID, err)
		}
		mu.Lock()
		defer mu.Unlock()
		redelivered = append(redelivered, d.MessageID)
		if len(redelivered) == len(orders) {
			once.Do(func() { close(all) })
		}
	})
	for range orders {
		receive(t, firstPass)
	}
	px.cut(false)
	close(release)
	receive(t, all)
	stop()
	if d := depth(t, setup, topo.Queue); d != 0 {
		t.Errorf("work queue holds %d messages, want 0", d)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplayBatchedDeadLetter: a batch the broker parked whole is listed
// with its orders and replayed as one single-order message per order.
func TestReplayBatchedDeadLetter(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	orders := []order.Order{testOrder(1), testOrder(2), testOrder(3)}
	publishBatch(t, conn, topo, topo.DeadExchange, orders...)

	dead, err := ListDead(context.Background(), conn, topo)
	if err != nil || len(dead) != 1 {
		t.Fatalf("list: %d letters, %v; want 1", len(dead), err)
	}
	dl := dead[0]
	if len(dl.OrderIDs) != 3 || dl.OrderIDs[0] != orders[0].ID || dl.SKU != "sku-1" {
		t.Fatalf("letter orders %v sku %q, want the batch's 3 orders on sku-1", dl.OrderIDs, dl.SKU)
	}
	res, err := ReplayDead(context.Background(), conn, topo, []string{dl.ID}, nil, false)
	if err != nil || len(res) != 1 || !res[0].Replayed {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	got := map[string]bool{}
	for range orders {
		d, ok := getOne(t, conn, topo.Queue)
		if !ok {
			t.Fatalf("only %d replayed messages", len(got))
		}
		if d.ContentType != ContentTypeJSON || headerString(d.Headers, HeaderReplayOf) != dl.ID ||
			headerString(d.Headers, "traceparent") != "00-"+d.MessageId {
			t.Errorf("replayed %s: type %s, headers %v", d.MessageId, d.ContentType, d.Headers)
		}
		got[d.MessageId] = true
	}
	for _, o := range orders {
		if !got[o.ID] {
			t.Errorf("order %s not replayed", o.ID)
		}
	}
	if n := depth(t, conn, topo.DeadQueue); n != 0 {
		t.Errorf("dead queue holds %d, want 0", n)
	}
}

// TestQueuedOrderWithdrawnAtItsDeadline: an order still waiting for a
// writer when its caller's deadline passes was never written: it is
// withdrawn and answered unavailable, and no later message carries it.
func TestQueuedOrderWithdrawnAtItsDeadline(t *testing.T) {
	p := newPublisher(&Conn{}, Topology{}, PublisherOptions{InFlight: 1, ConfirmTimeout: time.Hour})
	p.co.inFlight = 1 // the window is full: another message waits for its confirm
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := p.Publish(ctx, testOrder(1))
	if !isUnavailable(err) || errors.Is(err, order.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish = %v, want unavailable (not written) after its deadline", err)
	}
	p.co.inFlight = 0
	if batch, _ := p.take(); len(batch) != 0 {
		t.Fatalf("the next message would carry %d withdrawn orders", len(batch))
	}
}

// TestQueuedOrderAnsweredAtTheBound: an order that waits in the queue
// behind a full window until the publisher's bound passes is answered not
// written, though its caller would wait longer: the bound holds without
// the caller's help, and no later message carries the order.
func TestQueuedOrderAnsweredAtTheBound(t *testing.T) {
	p := newPublisher(&Conn{}, Topology{}, PublisherOptions{InFlight: 1, ConfirmTimeout: 50 * time.Millisecond})
	p.co.inFlight = 1 // the window stays full
	err := p.Publish(context.Background(), testOrder(1))
	if !isUnavailable(err) || !errors.Is(err, ErrNotWritten) || errors.Is(err, order.ErrOutcomeUnknown) {
		t.Fatalf("publish = %v, want unavailable (not written within the bound)", err)
	}
	p.co.inFlight = 0
	if batch, _ := p.take(); len(batch) != 0 {
		t.Fatalf("the next message would carry %d orders answered already", len(batch))
	}
}

// TestTakenOrderIsUnknownAtItsDeadline: once a writer took the order, a
// caller whose deadline passes cannot tell whether the broker has it.
func TestTakenOrderIsUnknownAtItsDeadline(t *testing.T) {
	p := newPublisher(&Conn{}, Topology{}, PublisherOptions{InFlight: 1, ConfirmTimeout: time.Hour})
	p.co.inFlight = 1
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() { errs <- p.Publish(ctx, testOrder(1)) }()
	waitFor(t, func() bool {
		p.co.mu.Lock()
		defer p.co.mu.Unlock()
		return len(p.co.queue) == 1
	})
	p.co.mu.Lock()
	batch := p.co.cutLocked(1) // a writer takes it
	p.co.mu.Unlock()
	if len(batch) != 1 {
		t.Fatalf("took %d orders, want 1", len(batch))
	}
	cancel()
	if err := receive(t, errs); !errors.Is(err, order.ErrOutcomeUnknown) || isUnavailable(err) {
		t.Fatalf("publish = %v, want an unknown outcome", err)
	}
}

// TestSingleOrderMessagesStillConsumed: a message of a gateway that sends
// one order per message (an older version, or SURGE_PUBLISH_MAX_BATCH=1)
// is consumed beside batched ones, each order once.
func TestSingleOrderMessagesStillConsumed(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	old := newTestPublisher(t, conn, topo, PublisherOptions{Channels: 1})
	single := testOrder(9)
	msg := amqp.Publishing{ContentType: ContentTypeJSON, DeliveryMode: amqp.Persistent, MessageId: single.ID, Body: mustJSON(t, single)}
	if err := old.PublishRaw(context.Background(), topo.Exchange, topo.RoutingKey, msg); err != nil {
		t.Fatal(err)
	}
	batched := []order.Order{testOrder(1), testOrder(2)}
	publishBatch(t, conn, topo, topo.Exchange, batched...)

	var mu sync.Mutex
	seen := map[string]int{}
	all := make(chan struct{})
	stop := runConsumer(t, conn, topo, ConsumerOptions{}, func(ctx context.Context, d *Delivery) {
		o, err := d.Order()
		if err != nil || o.ID != d.MessageID {
			t.Errorf("delivery %s: order %s, %v", d.MessageID, o.ID, err)
		}
		if err := d.Ack(); err != nil {
			t.Errorf("ack: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		seen[o.ID]++
		if len(seen) == 3 && seen[o.ID] == 1 {
			close(all)
		}
	})
	receive(t, all)
	stop()
	for _, o := range append(batched, single) {
		if seen[o.ID] != 1 {
			t.Errorf("order %s consumed %d times", o.ID, seen[o.ID])
		}
	}
	if d := depth(t, conn, topo.Queue); d != 0 {
		t.Errorf("work queue holds %d messages, want 0", d)
	}
}

// blockPublishers makes conn report what the broker's connection.blocked
// reports (a memory or disk alarm) until the returned func lifts it, which
// is safe to call more than once. Acks go on meanwhile: the broker stops
// reading only from a connection that publishes, and surge's publisher
// writes nothing while blocked.
func blockPublishers(conn *Conn) (lift func()) {
	conn.mu.Lock()
	cur := conn.cur
	conn.mu.Unlock()
	conn.blockedOn.Store(cur)
	return func() { conn.blockedOn.CompareAndSwap(cur, nil) }
}

// warnings counts the warnings logged about each message id.
type warnings struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "message_id" {
			w.mu.Lock()
			w.n[a.Value.String()]++
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) about(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[id]
}

// TestBatchOrderWhoseRetryCannotBePublished: when the broker refuses the
// retry copy of one order of a batch (it blocks publishers), that order is
// held, not its batch. The batch is delivered once: the order already
// invoiced is neither handled again nor parked, the order already retried
// gets one retry copy, and the held order is retried once the broker takes
// publishes again; nothing is parked.
func TestBatchOrderWhoseRetryCannotBePublished(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	invoiced, retried, held := testOrder(1), testOrder(2), testOrder(3)
	publishBatch(t, conn, topo, topo.Exchange, invoiced, retried, held)

	logged := &warnings{n: map[string]int{}}
	var mu sync.Mutex
	handled := map[string]int{} // deliveries per order and attempts
	settled := map[string]int{} // first-attempt settles per order
	redelivered, copies := 0, 0 // batch redeliveries, retry copies of retried
	var settleErrs []error
	count := func(m map[string]int, k string) int {
		mu.Lock()
		defer mu.Unlock()
		return m[k]
	}
	back := make(chan struct{})
	var backOnce sync.Once
	var lift func()
	stop := runConsumer(t, conn, topo, ConsumerOptions{Logger: slog.New(logged)}, func(ctx context.Context, d *Delivery) {
		mu.Lock()
		handled[fmt.Sprint(d.MessageID, "/", d.Attempts())]++
		round := handled[held.ID+"/0"]
		if d.Redelivered && d.MessageID == held.ID {
			redelivered++
		}
		mu.Unlock()
		var err error
		switch {
		case d.Attempts() > 0: // a retry copy back from its tier
			err = d.Ack()
			if d.MessageID == held.ID {
				backOnce.Do(func() { close(back) })
			}
		case d.MessageID == invoiced.ID:
			err = d.Ack()
		case d.MessageID == retried.ID:
			if err = d.Retry(errors.New("transient")); err == nil {
				mu.Lock()
				copies++
				mu.Unlock()
			}
		case d.MessageID == held.ID:
			// The other orders of this delivery settle first, then the
			// broker refuses the held order's copy.
			for count(settled, invoiced.ID) < round || count(settled, retried.ID) < round {
				if ctx.Err() != nil {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			lift = blockPublishers(conn)
			mu.Unlock()
			err = d.Retry(errors.New("transient"))
			lift()
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			settleErrs = append(settleErrs, err)
		}
		if d.Attempts() == 0 {
			settled[d.MessageID]++
		}
	})
	// Let the held order's copy be refused a few times (or its batch be
	// parked), then let the broker take publishes again.
	waitFor(t, func() bool { return logged.about(held.ID) >= 3 || depth(t, conn, topo.DeadQueue) > 0 })
	mu.Lock()
	lift()
	mu.Unlock()
	select {
	case <-back:
	case <-time.After(5 * time.Second):
		t.Errorf("the held order never came back from its retry tier")
	}
	stop()

	if redelivered > 0 {
		t.Errorf("the batch was redelivered %d times", redelivered)
	}
	if len(settleErrs) > 0 {
		t.Errorf("%d settles failed, the first: %v", len(settleErrs), settleErrs[0])
	}
	for _, w := range []struct {
		name     string
		id       string
		attempts int
	}{{"invoiced", invoiced.ID, 0}, {"retried", retried.ID, 0}, {"retried", retried.ID, 1},
		{"held", held.ID, 0}, {"held", held.ID, 1}} {
		if n := handled[fmt.Sprint(w.id, "/", w.attempts)]; n != 1 {
			t.Errorf("%s order at attempts %d handled %d times, want 1", w.name, w.attempts, n)
		}
	}
	if copies != 1 {
		t.Errorf("the retried order got %d retry copies, want 1", copies)
	}
	dead, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range dead {
		t.Errorf("parked: %s (%s) holding orders %v", dl.OrderID, dl.Reason, dl.OrderIDs)
	}
	for _, q := range append(topo.RetryQueues(), topo.Queue) {
		if n := depth(t, conn, q); n != 0 {
			t.Errorf("%s holds %d messages, want 0", q, n)
		}
	}
}

// TestRefusedCopyLeftToTheBrokerAtStop: a copy the broker keeps refusing
// holds its order until the consumer stops waiting for its handlers; the
// message then goes back to the work queue, and no copy was published.
func TestRefusedCopyLeftToTheBrokerAtStop(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	o := testOrder(1)
	if err := newTestPublisher(t, conn, topo, PublisherOptions{}).Publish(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	lift := blockPublishers(conn)
	defer lift()
	logged := &warnings{n: map[string]int{}}
	retried := make(chan error, 1)
	stop := runConsumer(t, conn, topo, ConsumerOptions{DrainTimeout: 300 * time.Millisecond, Logger: slog.New(logged)},
		func(ctx context.Context, d *Delivery) { retried <- d.Retry(errors.New("transient")) })
	waitFor(t, func() bool { return logged.about(o.ID) >= 2 })
	stop()
	if err := receive(t, retried); !isUnavailable(err) {
		t.Errorf("retry = %v, want unavailable once the consumer stopped", err)
	}
	lift()
	waitFor(t, func() bool { return depth(t, conn, topo.Queue) == 1 })
	if d, ok := getOne(t, conn, topo.Queue); !ok || d.MessageId != o.ID || !d.Redelivered || headerInt(d.Headers, HeaderAttempts) != 0 {
		t.Errorf("work queue gave %s (redelivered %v, attempts %d), want the original back", d.MessageId, d.Redelivered, headerInt(d.Headers, HeaderAttempts))
	}
	for _, q := range append(topo.RetryQueues(), topo.DeadQueue) {
		if n := depth(t, conn, q); n != 0 {
			t.Errorf("%s holds %d messages, want 0", q, n)
		}
	}
}

// TestRefusedCopyNotPublishedOnceTheOriginalIsBack: when the connection
// the original came on is lost while its copy is refused, the tries stop
// (the broker delivers the original again) and no copy is published.
func TestRefusedCopyNotPublishedOnceTheOriginalIsBack(t *testing.T) {
	url := testenv.AMQPURL(t)
	setup := dialTest(t, url)
	topo := testTopology(t, setup)
	o := testOrder(1)
	if err := newTestPublisher(t, setup, topo, PublisherOptions{}).Publish(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	uri, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, fmt.Sprintf("%s:%d", uri.Host, uri.Port))
	conn := dialTest(t, px.url())
	lift := blockPublishers(conn)
	defer lift()
	logged := &warnings{n: map[string]int{}}
	retried, again := make(chan error, 1), make(chan struct{})
	stop := runConsumer(t, conn, topo, ConsumerOptions{Logger: slog.New(logged)}, func(ctx context.Context, d *Delivery) {
		if !d.Redelivered {
			retried <- d.Retry(errors.New("transient"))
			return
		}
		if err := d.Ack(); err != nil {
			t.Errorf("ack the redelivered original: %v", err)
		}
		close(again)
	})
	waitFor(t, func() bool { return logged.about(o.ID) >= 2 })
	px.cut(false)
	if err := receive(t, retried); !isUnavailable(err) {
		t.Errorf("retry = %v, want unavailable once the original's channel closed", err)
	}
	receive(t, again)
	stop()
	for _, q := range append(topo.RetryQueues(), topo.DeadQueue, topo.Queue) {
		if n := depth(t, setup, q); n != 0 {
			t.Errorf("%s holds %d messages, want 0", q, n)
		}
	}
}
