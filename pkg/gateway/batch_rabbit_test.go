package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/order"
	"surge/pkg/queue"
)

// TestCoalescedNackUndoesExactlyItsReservations: many orders accepted at
// once through the real publisher, whose coalesced messages the broker
// partly refuses (the work queue is full): an order answered accepted is
// in the queue, reserved; one answered not taken is in no queue and its
// reservation alone was undone; no answer is unknown.
func TestCoalescedNackUndoesExactlyItsReservations(t *testing.T) {
	const n = 200
	conn, topo := boundedTopology(t, 2)
	pub, err := queue.NewPublisher(conn, topo, queue.PublisherOptions{InFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	st, claims := newFakeStock(1_000_000), newFakeClaims()
	s := New(Service{Stock: st, Idem: claims, Queue: pub, Catalog: knownSKUs{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})

	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc, err := s.Accept(context.Background(), buy(fmt.Sprint("c", i), 1), "k")
			ids[i], errs[i] = acc.OrderID, err
			if err != nil {
				var u *order.UnknownOutcomeError
				if errors.As(err, &u) {
					ids[i] = u.OrderID
				}
			}
		}()
	}
	wg.Wait()
	held := queuedOrders(t, conn, topo.Queue)
	accepted, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil && held[ids[i]] == 1 && st.state[ids[i]] == "A":
			accepted++
		case errors.Is(err, order.ErrUnavailable) && !errors.Is(err, order.ErrOutcomeUnknown) &&
			errors.Is(err, queue.ErrNacked):
			refused++
		default:
			t.Errorf("request %d (order %s): answer %v, in the queue %d times", i, ids[i], err, held[ids[i]])
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("%d accepted, %d refused: want both", accepted, refused)
	}
	if got := st.reserved(); got != accepted {
		t.Errorf("%d units reserved, want %d (one per accepted order, none for the refused)", got, accepted)
	}
	for id, state := range st.state {
		if (state == "U") == (held[id] == 1) {
			t.Errorf("order %s: stock state %s, in the queue %d times", id, state, held[id])
		}
	}
}

// boundedTopology declares a topology whose work queue refuses (nacks)
// publishes once it holds max messages; deleted at cleanup.
func boundedTopology(t *testing.T, max int) (*queue.Conn, queue.Topology) {
	t.Helper()
	url := testenv.AMQPURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := queue.Dial(ctx, url, queue.DialOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p := testenv.Unique("t.gw") + "."
	topo := queue.NewTopology(queue.Topology{Exchange: p + "orders", Queue: p + "orders.created",
		DeadExchange: p + "orders.dlx", DeadQueue: p + "orders.dead", RetryExchange: p + "orders.retry"})
	testkit.OnChannel(t, conn, func(ch *amqp.Channel) error {
		if err := topo.Declare(ch); err != nil {
			return err
		}
		if _, err := ch.QueueDelete(topo.Queue, false, false, false); err != nil {
			return err
		}
		args := amqp.Table{"x-queue-type": "quorum", "x-max-length": int64(max), "x-overflow": "reject-publish"}
		if _, err := ch.QueueDeclare(topo.Queue, true, false, false, false, args); err != nil {
			return err
		}
		return ch.QueueBind(topo.Queue, topo.RoutingKey, topo.Exchange, false, nil)
	})
	t.Cleanup(func() { testkit.OnChannel(t, conn, topo.Delete) })
	return conn, topo
}

// queuedOrders takes every message of the queue and counts the orders
// they hold, batches read as the consumer reads them.
func queuedOrders(t *testing.T, conn *queue.Conn, name string) map[string]int {
	t.Helper()
	held := map[string]int{}
	testkit.OnChannel(t, conn, func(ch *amqp.Channel) error {
		for {
			d, ok, err := ch.Get(name, true)
			if err != nil || !ok {
				return err
			}
			if d.ContentType != queue.ContentTypeOrders {
				held[d.MessageId]++
				continue
			}
			var b struct {
				Orders []struct {
					ID string `json:"id"`
				} `json:"orders"`
			}
			if err := json.Unmarshal(d.Body, &b); err != nil {
				return err
			}
			for _, e := range b.Orders {
				held[e.ID]++
			}
		}
	})
	return held
}
