package queue

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/order"
)

// The order status (gateway.Tracker) reads an order pending for as long as
// the request that reserved it may still answer 503 unavailable, and that
// window is the publish's bound plus the request's cleanup. So Publish
// must return within the bound it is given (PublisherOptions.ConfirmTimeout),
// whatever it waits for: the orders ahead of it, a channel being opened,
// the write, the confirm. The tests below stall the broker and check that
// every publish returns within the bound, with room for scheduling; a
// publish that waited for the stall to end would take many bounds.

// testBound is the publish bound of these tests, and boundSlack the room
// left for scheduling on a busy machine: far less than the several bounds
// an unbounded wait takes.
const (
	testBound  = 300 * time.Millisecond
	boundSlack = time.Second
)

// stallable dials the test broker through a proxy the test can stall.
func stallable(t *testing.T) (*Conn, *testenv.Proxy) {
	t.Helper()
	u, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	px := testenv.NewProxy(t, u.Host)
	u.Host = px.Addr()
	return dialTest(t, u.String()), px
}

// timedPublish publishes o and says what it returned and how long it took.
type timedResult struct {
	err  error
	took time.Duration
}

func timedPublish(pub *Publisher, o order.Order) timedResult {
	start := time.Now()
	err := pub.Publish(context.Background(), o)
	return timedResult{err, time.Since(start)}
}

// TestPublishBoundedBehindStalledConfirms: with the broker's confirms held
// back, orders published one after another queue behind the messages that
// wait for their confirm. Each must still return within the bound, as not
// taken (it waited in the queue and was never written) or unknown (written,
// no confirm), never later.
func TestPublishBoundedBehindStalledConfirms(t *testing.T) {
	setup := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, setup)
	conn, px := stallable(t)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{Channels: 1, InFlight: 1, MaxBatch: 1, ConfirmTimeout: testBound})
	if err := pub.Publish(context.Background(), testOrder(0)); err != nil {
		t.Fatalf("publish before the stall: %v", err)
	}
	px.Stall()
	t.Cleanup(px.Resume)

	const n = 10
	results := make([]timedResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = timedPublish(pub, testOrder(1+i)) })
	}
	wg.Wait()
	for i, r := range results {
		if r.took > testBound+boundSlack {
			t.Errorf("order %d returned after %v, past its bound %v", i, r.took.Round(time.Millisecond), testBound)
		}
		if r.err == nil || !(isUnavailable(r.err) || errors.Is(r.err, order.ErrOutcomeUnknown)) {
			t.Errorf("order %d: %v, want not taken or unknown while the broker stalls", i, r.err)
		}
	}
}

// TestPublishBoundedWhenChannelOpenHangs: the broker stops answering before
// the publisher has a channel, so opening one hangs (channel.open gets no
// reply until the connection's heartbeat gives up). Publish must return
// within its bound all the same, as not taken: nothing was written.
func TestPublishBoundedWhenChannelOpenHangs(t *testing.T) {
	setup := dialTest(t, testenv.AMQPURL(t))
	topo := testTopology(t, setup)
	conn, px := stallable(t)
	pub := newTestPublisher(t, conn, topo, PublisherOptions{Channels: 1, ConfirmTimeout: testBound})
	px.Stall()
	t.Cleanup(px.Resume)

	done := make(chan timedResult, 1)
	go func() { done <- timedPublish(pub, testOrder(1)) }()
	select {
	case r := <-done:
		if r.took > testBound+boundSlack {
			t.Errorf("returned after %v, past its bound %v", r.took.Round(time.Millisecond), testBound)
		}
		if !isUnavailable(r.err) || errors.Is(r.err, order.ErrOutcomeUnknown) {
			t.Errorf("publish while a channel cannot be opened = %v, want not taken", r.err)
		}
	case <-time.After(testBound + boundSlack):
		t.Fatalf("publish still waiting %v after its call, past its bound %v (opening a channel)", testBound+boundSlack, testBound)
	}
}
