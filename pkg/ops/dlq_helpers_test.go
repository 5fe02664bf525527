package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
	"surge/pkg/ops"
	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/store"
)

// dlqEnv is a dead queue on its own topology and a migrated database.
type dlqEnv struct {
	conn *queue.Conn
	topo queue.Topology
	db   *store.Store
	svc  *ops.DeadLetters
	sku  string
}

func newDLQEnv(t *testing.T) *dlqEnv {
	t.Helper()
	url := testenv.AMQPURL(t)
	dsn := testenv.MySQLDSN(t)
	ctx := context.Background()
	conn, err := queue.Dial(ctx, url, queue.DialOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p := testenv.Unique("t.ops") + "."
	topo := queue.NewTopology(queue.Topology{Exchange: p + "orders", Queue: p + "orders.created", DeadExchange: p + "orders.dlx",
		DeadQueue: p + "orders.dead", RetryExchange: p + "orders.retry",
		RetryDelays: []time.Duration{200 * time.Millisecond}})
	testkit.OnChannel(t, conn, func(ch *amqp.Channel) error { return topo.Declare(ch) })
	t.Cleanup(func() { testkit.OnChannel(t, conn, func(ch *amqp.Channel) error { return topo.Delete(ch) }) })
	db, err := store.Open(ctx, dsn, store.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e := &dlqEnv{conn: conn, topo: topo, db: db, sku: testenv.Unique("dlq-")}
	e.svc = &ops.DeadLetters{Queue: ops.QueueDead{Conn: conn, Topology: topo}, DB: db}
	return e
}

func testOrder(sku string, i int) order.Order {
	return order.Order{ID: order.IDFor(sku, fmt.Sprint(i), 0), SKU: sku, Qty: 1 + i%3, CustomerID: sku}
}

// park puts a message in the dead queue the way the worker parks one,
// and returns its dead letter id.
func (e *dlqEnv) park(t *testing.T, msgID string, body []byte, reason string, failed time.Time) string {
	t.Helper()
	pub, err := queue.NewPublisher(e.conn, e.topo, queue.PublisherOptions{Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	id := ulid.Make().String()
	at := failed.UTC().Format(time.RFC3339Nano)
	msg := amqp.Publishing{MessageId: msgID, ContentType: queue.ContentTypeJSON, DeliveryMode: amqp.Persistent,
		Body: body, Headers: amqp.Table{queue.HeaderDeadID: id, queue.HeaderReason: reason,
			queue.HeaderAttempts: int32(1), queue.HeaderLastError: "cause of " + reason,
			queue.HeaderFirstFailure: at, queue.HeaderLastFailure: at}}
	if err := pub.PublishRaw(context.Background(), e.topo.DeadExchange, e.topo.RoutingKey, msg); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *dlqEnv) parkOrder(t *testing.T, o order.Order, reason string, failed time.Time) string {
	t.Helper()
	body, _ := json.Marshal(o)
	return e.park(t, o.ID, body, reason, failed)
}

// ids lists the parked ids in queue order.
func (e *dlqEnv) ids(t *testing.T) []string {
	t.Helper()
	letters, err := e.svc.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, l := range letters {
		out = append(out, l.ID)
	}
	return out
}

// workQueue drains the work queue and returns the order ids found there.
func (e *dlqEnv) workQueue(t *testing.T) []string {
	t.Helper()
	out := []string{}
	testkit.OnChannel(t, e.conn, func(ch *amqp.Channel) error {
		for {
			d, ok, err := ch.Get(e.topo.Queue, true)
			if err != nil || !ok {
				return err
			}
			if got := d.Headers[queue.HeaderReplayOf]; got == nil {
				t.Errorf("replayed message %s has no %s header", d.MessageId, queue.HeaderReplayOf)
			}
			out = append(out, d.MessageId)
		}
	})
	return out
}

// audit returns the audit log as "dead id outcome actor" lines.
func (e *dlqEnv) audit(t *testing.T) []string {
	t.Helper()
	var rows []struct {
		ID      string `db:"dead_letter_id"`
		Outcome string `db:"outcome"`
		Actor   string `db:"actor"`
	}
	if err := e.db.DB().Select(&rows, "SELECT dead_letter_id, outcome, actor FROM dlq_replays ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range rows {
		out = append(out, strings.Join([]string{r.ID, r.Outcome, r.Actor}, " "))
	}
	return out
}

// outcomes returns "id outcome" per report item.
func outcomes(rep admin.LetterReport) []string {
	out := []string{}
	for _, it := range rep.Items {
		out = append(out, it.ID+" "+it.Outcome)
	}
	return out
}

// invoice processes o in MySQL as the worker would.
func (e *dlqEnv) invoice(t *testing.T, o order.Order) {
	t.Helper()
	ctx := context.Background()
	name, price := "Item", int64(500)
	if _, err := e.db.SetStock(ctx, o.SKU, 100, &name, &price); err != nil {
		t.Fatal(err)
	}
	if res, err := e.db.Process(ctx, o, 0); err != nil || res.Status != order.StatusInvoiced {
		t.Fatalf("process %s: %+v %v", o.ID, res, err)
	}
}

// parkBatch puts a batched message in the dead queue as the broker parks
// one past its delivery limit (no surge headers), and returns its id.
func (e *dlqEnv) parkBatch(t *testing.T, msgID string, orders []order.Order) string {
	t.Helper()
	type entry struct {
		ID    string      `json:"id"`
		Order order.Order `json:"order"`
	}
	var body struct {
		Orders []entry `json:"orders"`
	}
	for _, o := range orders {
		body.Orders = append(body.Orders, entry{o.ID, o})
	}
	raw, _ := json.Marshal(body)
	pub, err := queue.NewPublisher(e.conn, e.topo, queue.PublisherOptions{Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	msg := amqp.Publishing{MessageId: msgID, ContentType: queue.ContentTypeOrders, DeliveryMode: amqp.Persistent, Body: raw}
	if err := pub.PublishRaw(context.Background(), e.topo.DeadExchange, e.topo.RoutingKey, msg); err != nil {
		t.Fatal(err)
	}
	letters, err := e.svc.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range letters {
		if l.OrderID == msgID {
			return l.ID
		}
	}
	t.Fatalf("batch %s not listed", msgID)
	return ""
}
