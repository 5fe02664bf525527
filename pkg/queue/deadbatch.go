package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// Bounds of a dead-letter operation.
const (
	deadLockWait = 5 * time.Second // waiting for another operation to finish
	deadIdleWait = 5 * time.Second // waiting for the next message of the queue
)

// deadBatch is the whole dead queue, held unacked on one channel.
type deadBatch struct {
	ch    *amqp.Channel
	queue string
	items []*heldLetter
}

type heldLetter struct {
	letter  DeadLetter
	raw     amqp.Delivery
	removed bool
}

// withDeadLetters takes the lock, holds every dead letter, runs fn, and
// requeues what fn did not remove, in order, whatever fn returned.
func withDeadLetters(ctx context.Context, conn *Conn, topo Topology, fn func(*deadBatch) error) error {
	topo.setDefaults()
	conn.deadMu.Lock()
	defer conn.deadMu.Unlock()
	unlock, err := lockDeadQueue(ctx, conn, topo.DeadQueue+".ops-lock")
	if err != nil {
		return err
	}
	defer unlock()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	// Closing the channel returns anything still unacked, in order: the
	// safety net when requeue below cannot run.
	defer ch.Close()
	b, err := holdAll(ctx, ch, topo.DeadQueue)
	if err == nil {
		err = fn(b)
	}
	if rerr := b.requeueRest(); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// lockDeadQueue declares an exclusive queue as a broker-wide lock: the
// broker refuses it (405) to other connections while it exists, and drops
// it if this connection dies.
func lockDeadQueue(ctx context.Context, conn *Conn, name string) (func(), error) {
	deadline := time.Now().Add(deadLockWait)
	for {
		ch, err := conn.Channel()
		if err != nil {
			return nil, err
		}
		_, err = ch.QueueDeclare(name, false, false, true, false, nil)
		if err == nil {
			return func() {
				_, _ = ch.QueueDelete(name, false, false, false)
				_ = ch.Close()
			}, nil
		}
		_ = ch.Close()
		var aerr *amqp.Error
		if !errors.As(err, &aerr) || aerr.Code != amqp.ResourceLocked {
			return nil, fmt.Errorf("lock %s: %w: %w", name, order.ErrUnavailable, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s: %w: another dead-letter operation is running", name, order.ErrConflict)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock %s: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// holdAll takes every message the queue holds (its ready count when the
// call starts), unacked. The batch is valid even on error, so that what
// was taken can be requeued.
func holdAll(ctx context.Context, ch *amqp.Channel, queue string) (*deadBatch, error) {
	b := &deadBatch{ch: ch, queue: queue}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
			return b, fmt.Errorf("queue %s: %w", queue, order.ErrNotFound)
		}
		return b, fmt.Errorf("inspect %s: %w: %w", queue, order.ErrUnavailable, err)
	}
	if q.Messages == 0 {
		return b, nil
	}
	// With prefetch n the broker pushes exactly the n messages counted;
	// past 65535 it pushes everything and the extra are requeued after.
	prefetch := q.Messages
	if prefetch > 65535 {
		prefetch = 0
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return b, fmt.Errorf("set prefetch: %w: %w", order.ErrUnavailable, err)
	}
	tag := "surge-ops-" + ulid.Make().String()
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		return b, fmt.Errorf("consume %s: %w: %w", queue, order.ErrUnavailable, err)
	}
	defer func() { _ = ch.Cancel(tag, false) }()
	idle := time.NewTimer(deadIdleWait)
	defer idle.Stop()
	for len(b.items) < q.Messages {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return b, fmt.Errorf("consume %s: %w: channel closed", queue, order.ErrUnavailable)
			}
			b.items = append(b.items, &heldLetter{letter: parseDeadLetter(d), raw: d})
			idle.Reset(deadIdleWait)
		case <-idle.C:
			return b, fmt.Errorf("consume %s: %w: %d of %d messages arrived", queue,
				order.ErrUnavailable, len(b.items), q.Messages)
		case <-ctx.Done():
			return b, fmt.Errorf("consume %s: %w", queue, ctx.Err())
		}
	}
	return b, nil
}

// remove acks one held letter: it leaves the queue for good.
func (b *deadBatch) remove(it *heldLetter) error {
	if err := b.ch.Ack(it.raw.DeliveryTag, false); err != nil {
		return fmt.Errorf("ack: %w: %w", order.ErrUnavailable, err)
	}
	it.removed = true
	return nil
}

// requeueRest returns the letters still held in one nack covering all of
// them, which the broker requeues in delivery order, and waits until the
// queue counts them again. A quorum queue applies the requeue
// asynchronously (measured on 3.10: a passive declare right after it
// usually counts fewer messages); releasing the lock earlier would let the
// next operation read a prefix of the queue, which reorders it.
func (b *deadBatch) requeueRest() error {
	var last uint64
	held := 0
	for _, it := range b.items {
		if !it.removed {
			last = it.raw.DeliveryTag
			held++
		}
	}
	if last == 0 {
		return nil
	}
	// Ready messages now are the ones parked since holdAll started.
	arrived, err := b.ready()
	if err != nil {
		return fmt.Errorf("requeue dead letters: %w: %w", order.ErrUnavailable, err)
	}
	if err := b.ch.Nack(last, true, true); err != nil {
		return fmt.Errorf("requeue dead letters: %w: %w", order.ErrUnavailable, err)
	}
	deadline := time.Now().Add(deadIdleWait)
	for {
		n, err := b.ready()
		switch {
		case err != nil:
			return fmt.Errorf("requeue dead letters: %w: %w", order.ErrUnavailable, err)
		case n >= arrived+held:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("requeue dead letters: %w: %d of %d not counted in %s yet",
				order.ErrUnavailable, arrived+held-n, held, b.queue)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (b *deadBatch) ready() (int, error) {
	q, err := b.ch.QueueDeclarePassive(b.queue, true, false, false, false, nil)
	return q.Messages, err
}

// parseDeadLetter reads surge's headers, or the broker's death record for
// a message the broker dead-lettered itself.
func parseDeadLetter(d amqp.Delivery) DeadLetter {
	h := copyHeaders(d.Headers, func(k string) bool { return k == "x-delivery-count" })
	dl := DeadLetter{
		ID:           headerString(h, HeaderDeadID),
		OrderID:      d.MessageId,
		Reason:       headerString(h, HeaderReason),
		LastError:    headerString(h, HeaderLastError),
		Attempts:     headerInt(h, HeaderAttempts),
		FirstFailure: headerTime(h, HeaderFirstFailure),
		LastFailure:  headerTime(h, HeaderLastFailure),
		Body:         d.Body,
		Headers:      h,
	}
	var body struct {
		ID  string `json:"order_id"`
		SKU string `json:"sku"`
	}
	if isBatch(d.ContentType) {
		dl.OrderIDs, dl.SKU = batchOrders(d.Body)
	} else if json.Unmarshal(d.Body, &body) == nil {
		dl.SKU = body.SKU
		if dl.OrderID == "" {
			dl.OrderID = body.ID
		}
	}
	death := lastDeath(h)
	if dl.Reason == "" {
		dl.Reason = headerString(death, "reason")
	}
	if t, ok := death["time"].(time.Time); ok && dl.LastFailure.IsZero() {
		dl.LastFailure = t.UTC()
	}
	if dl.ID == "" {
		dl.ID = contentID(d, h)
	}
	return dl
}

// lastDeath is the most recent x-death record (the broker puts it first).
func lastDeath(h amqp.Table) amqp.Table {
	deaths, _ := h["x-death"].([]interface{})
	if len(deaths) == 0 {
		return nil
	}
	t, _ := deaths[0].(amqp.Table)
	return t
}

// contentID names a message that has no dead id from what does not change
// while it stays parked: its id, body and death records.
func contentID(d amqp.Delivery, h amqp.Table) string {
	sum := sha256.New()
	fmt.Fprintf(sum, "%s\x00%s\x00", d.MessageId, d.Body)
	death := lastDeath(h)
	var unix int64
	if t, ok := death["time"].(time.Time); ok {
		unix = t.Unix()
	}
	fmt.Fprintf(sum, "%s\x00%s\x00%d\x00%d", headerString(death, "queue"), headerString(death, "reason"),
		unix, headerInt(death, "count"))
	return "b" + hex.EncodeToString(sum.Sum(nil))[:25]
}

// batchOrders lists a batched body's order ids, and their SKU when they
// share one.
func batchOrders(body []byte) (ids []string, sku string) {
	entries, err := decodeBatch(body)
	if err != nil {
		return nil, ""
	}
	for i, e := range entries {
		ids = append(ids, e.ID)
		var o struct {
			SKU string `json:"sku"`
		}
		_ = json.Unmarshal(e.Order, &o)
		switch {
		case i == 0:
			sku = o.SKU
		case o.SKU != sku:
			sku = ""
		}
	}
	return ids, sku
}
