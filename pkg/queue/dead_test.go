package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/order"
)

// seedDead parks n orders the way Delivery.Dead does, one at a time so
// the queue order is known, and returns their dead ids in that order.
func seedDead(t testing.TB, conn *Conn, topo Topology, n int) []string {
	t.Helper()
	pub := newTestPublisher(t, conn, topo, PublisherOptions{Channels: 1})
	ids := make([]string, n)
	for i := range n {
		o := testOrder(i)
		o.SKU = fmt.Sprintf("sku-%d", i%2)
		body, _ := json.Marshal(o)
		ids[i] = ulid.Make().String()
		now := formatTime(time.Now())
		msg := amqp.Publishing{MessageId: o.ID, ContentType: ContentTypeJSON, DeliveryMode: amqp.Persistent, Body: body,
			Headers: amqp.Table{HeaderDeadID: ids[i], HeaderReason: order.ReasonUnknownSKU, HeaderAttempts: int32(1),
				HeaderLastError: "no such sku", HeaderFirstFailure: now, HeaderLastFailure: now}}
		if err := pub.PublishRaw(context.Background(), topo.DeadExchange, topo.RoutingKey, msg); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func deadIDs(t testing.TB, conn *Conn, topo Topology) []string {
	t.Helper()
	dead, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatalf("list dead: %v", err)
	}
	ids := make([]string, len(dead))
	for i, dl := range dead {
		ids[i] = dl.ID
	}
	return ids
}

func TestListDeadKeepsOrderAndCount(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	ids := seedDead(t, conn, topo, 10)

	first, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	second, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second listing differs (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(ids, deadIDs(t, conn, topo)); diff != "" {
		t.Errorf("dead ids (-parked +listed):\n%s", diff)
	}
	if first[3].OrderID != testOrder(3).ID || first[3].SKU != "sku-1" || first[3].Reason != order.ReasonUnknownSKU ||
		first[3].Attempts != 1 || first[3].LastError != "no such sku" || first[3].FirstFailure.IsZero() {
		t.Errorf("listed letter = %+v", first[3])
	}
	if n := depth(t, conn, topo.DeadQueue); n != 10 {
		t.Errorf("dead queue holds %d messages after listing, want 10", n)
	}
}

func TestListDeadEmptyAndMissing(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	if dead, err := ListDead(context.Background(), conn, topo); err != nil || len(dead) != 0 {
		t.Errorf("list empty queue = %v, %v", dead, err)
	}
	missing := Topology{DeadQueue: testenv.Unique("t.nope.")}
	if _, err := ListDead(context.Background(), conn, missing); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("list missing queue = %v, want ErrNotFound", err)
	}
}

func TestConcurrentListingsKeepOrder(t *testing.T) {
	url := testenv.AMQPURL(t)
	conns := []*Conn{dialTest(t, url), dialTest(t, url)}
	topo := testTopology(t, conns[0])
	ids := seedDead(t, conns[0], topo, 20)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half on the same Conn, half across two connections (the
			// broker-side lock).
			if got := deadIDs(t, conns[i%2], topo); !cmp.Equal(ids, got) {
				t.Errorf("concurrent listing %d: %s", i, cmp.Diff(ids, got))
			}
		}()
	}
	wg.Wait()
	if diff := cmp.Diff(ids, deadIDs(t, conns[0], topo)); diff != "" {
		t.Errorf("after concurrent listings (-parked +listed):\n%s", diff)
	}
}

func TestReplayDeadByID(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	ids := seedDead(t, conn, topo, 5)

	res, err := ReplayDead(context.Background(), conn, topo, []string{ids[2]}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []ReplayResult{{ID: ids[2], OrderID: testOrder(2).ID, Replayed: true}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	rest := []string{ids[0], ids[1], ids[3], ids[4]}
	if diff := cmp.Diff(rest, deadIDs(t, conn, topo)); diff != "" {
		t.Errorf("remaining dead letters (-want +got):\n%s", diff)
	}
	d, ok := getOne(t, conn, topo.Queue)
	if !ok {
		t.Fatal("the replayed order is not in the work queue")
	}
	if d.MessageId != testOrder(2).ID || headerString(d.Headers, HeaderReplayOf) != ids[2] {
		t.Errorf("replayed message id %s, replay-of %v", d.MessageId, d.Headers[HeaderReplayOf])
	}
	for k := range d.Headers {
		if k != HeaderReplayOf && strings.HasPrefix(k, "x-surge-") {
			t.Errorf("replayed message still carries %s", k)
		}
	}
	if n := depth(t, conn, topo.Queue); n != 0 {
		t.Errorf("work queue holds %d more messages, want exactly one replayed", n)
	}
}

func TestReplayDeadByFilterAndDryRun(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	ids := seedDead(t, conn, topo, 6)
	sku1 := func(dl DeadLetter) bool { return dl.SKU == "sku-1" }

	dry, err := ReplayDead(context.Background(), conn, topo, nil, sku1, true)
	if err != nil {
		t.Fatal(err)
	}
	wantDry := []ReplayResult{
		{ID: ids[1], OrderID: testOrder(1).ID}, {ID: ids[3], OrderID: testOrder(3).ID}, {ID: ids[5], OrderID: testOrder(5).ID},
	}
	if diff := cmp.Diff(wantDry, dry); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ids, deadIDs(t, conn, topo)); diff != "" || depth(t, conn, topo.Queue) != 0 {
		t.Errorf("dry run changed the queues: %s", diff)
	}

	res, err := ReplayDead(context.Background(), conn, topo, nil, sku1, false)
	if err != nil || len(res) != 3 {
		t.Fatalf("replay = %v, %v", res, err)
	}
	if diff := cmp.Diff([]string{ids[0], ids[2], ids[4]}, deadIDs(t, conn, topo)); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}
	if n := depth(t, conn, topo.Queue); n != 3 {
		t.Errorf("work queue holds %d, want 3", n)
	}
	if _, err := ReplayDead(context.Background(), conn, topo, nil, nil, false); !errors.Is(err, order.ErrInvalid) {
		t.Errorf("replay with no selection = %v, want ErrInvalid", err)
	}
}

func TestUnknownIDsChangeNothing(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	ids := seedDead(t, conn, topo, 3)
	_, err := ReplayDead(context.Background(), conn, topo, []string{ids[0], "01NOPE"}, nil, false)
	if !errors.Is(err, order.ErrNotFound) || !strings.Contains(err.Error(), "01NOPE") {
		t.Errorf("replay with an unknown id = %v, want ErrNotFound naming it", err)
	}
	_, err = DiscardDead(context.Background(), conn, topo, []string{"01GONE", ids[1]})
	if !errors.Is(err, order.ErrNotFound) || !strings.Contains(err.Error(), "01GONE") {
		t.Errorf("discard with an unknown id = %v, want ErrNotFound naming it", err)
	}
	if diff := cmp.Diff(ids, deadIDs(t, conn, topo)); diff != "" {
		t.Errorf("dead letters changed (-want +got):\n%s", diff)
	}
	if n := depth(t, conn, topo.Queue); n != 0 {
		t.Errorf("work queue holds %d, want 0", n)
	}
}

func TestDiscardDead(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	ids := seedDead(t, conn, topo, 5)
	removed, err := DiscardDead(context.Background(), conn, topo, []string{ids[3], ids[1]})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{ids[1], ids[3]}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[0], ids[2], ids[4]}, deadIDs(t, conn, topo)); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}
	if n := depth(t, conn, topo.Queue); n != 0 {
		t.Errorf("work queue holds %d, want 0", n)
	}

	// The discarded queue keeps both, as they were; one restored is parked
	// again, last, with its id, reason and attempts.
	kept, err := ListDiscarded(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0].ID != ids[1] || kept[1].ID != ids[3] ||
		kept[0].Reason != order.ReasonUnknownSKU || kept[0].Attempts != 1 || kept[0].Headers[HeaderDiscardedAt] == nil {
		t.Fatalf("kept copies = %+v, want %s and %s with their headers", kept, ids[1], ids[3])
	}
	if _, err := RestoreDiscarded(context.Background(), conn, topo, []string{"01NOSUCH"}); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("restore of an unknown id: %v, want not found", err)
	}
	restored, err := RestoreDiscarded(context.Background(), conn, topo, []string{ids[3]})
	if err != nil || len(restored) != 1 || restored[0] != ids[3] {
		t.Fatalf("restore = %v, %v", restored, err)
	}
	dead, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 4 || dead[3].ID != ids[3] || dead[3].Reason != order.ReasonUnknownSKU || dead[3].Attempts != 1 ||
		dead[3].Headers[HeaderDiscardedAt] != nil {
		t.Errorf("after restore, dead letters = %+v", dead)
	}
	if got := depth(t, conn, topo.DiscardedQueue()); got != 1 {
		t.Errorf("discarded queue holds %d, want 1", got)
	}
}

// A message the worker never settles exceeds the delivery limit and is
// dead-lettered by the broker itself: it has no surge dead id, yet gets a
// stable one and can be replayed.
func TestBrokerDeadLetteredMessage(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn, func(t *Topology) { t.DeliveryLimit = 1 })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	pub := newTestPublisher(t, conn, topo, PublisherOptions{})
	o := testOrder(9)
	if err := pub.Publish(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	// Deliver and requeue until the broker gives up on it.
	waitFor(t, func() bool {
		if d, ok, err := ch.Get(topo.Queue, false); err != nil {
			t.Fatalf("get: %v", err)
		} else if ok {
			if err := d.Nack(false, true); err != nil {
				t.Fatal(err)
			}
		}
		return depth(t, conn, topo.DeadQueue) == 1
	})

	first, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	second, err := ListDead(context.Background(), conn, topo)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0].Reason != "delivery_limit" || first[0].OrderID != o.ID ||
		!strings.HasPrefix(first[0].ID, "b") || first[0].LastFailure.IsZero() {
		t.Fatalf("listing = %+v", first)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second listing differs:\n%s", diff)
	}
	if _, err := ReplayDead(context.Background(), conn, topo, []string{first[0].ID}, nil, false); err != nil {
		t.Fatal(err)
	}
	if n := depth(t, conn, topo.Queue); n != 1 {
		t.Errorf("work queue holds %d after replay, want 1", n)
	}
	if n := depth(t, conn, topo.DeadQueue); n != 0 {
		t.Errorf("dead queue holds %d after replay, want 0", n)
	}
}

func TestQueueDepthMissingQueue(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	if _, _, err := QueueDepth(context.Background(), conn, testenv.Unique("t.nope.")); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("depth of a missing queue = %v, want ErrNotFound", err)
	}
}

func TestDeclareIsIdempotentAndRefusesDrift(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, conn)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := topo.Declare(ch); err != nil {
		t.Fatalf("second declare: %v", err)
	}
	drift := topo
	drift.DeliveryLimit = 7
	if err := drift.Declare(ch); err == nil {
		t.Error("declare with another delivery limit succeeded, want PRECONDITION_FAILED")
	}
}
