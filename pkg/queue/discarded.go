package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// DiscardedTTL is how long the discarded queue keeps the copy of a
// discarded dead letter, so that a discard made by mistake can be undone
// (RestoreDiscarded).
const DiscardedTTL = 30 * 24 * time.Hour

// HeaderDiscardedAt is when a dead letter was discarded (RFC 3339), on its
// copy in the discarded queue.
const HeaderDiscardedAt = "x-surge-discarded-at"

// DiscardedQueue names the queue that keeps discarded dead letters:
// DeadQueue + ".discarded" ("orders.dead.discarded"). It is bound to no
// exchange: only DiscardDead writes to it.
func (t Topology) DiscardedQueue() string {
	t.setDefaults()
	return t.DeadQueue + ".discarded"
}

// discarded is t with the discarded queue in the dead queue's place, so
// that the dead-letter operations (hold all, select, remove, requeue the
// rest, under a lock of its own) work on it unchanged.
func (t Topology) discarded() Topology {
	t.setDefaults()
	t.DeadQueue = t.DiscardedQueue()
	return t
}

func declareDiscarded(ch *amqp.Channel, t Topology) error {
	args := amqp.Table{"x-queue-type": "quorum", "x-message-ttl": DiscardedTTL.Milliseconds()}
	if t.DeadDeliveryLimit > 0 {
		args["x-delivery-limit"] = int64(t.DeadDeliveryLimit)
	}
	name := t.DiscardedQueue()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return fmt.Errorf("declare queue %s: %w", name, err)
	}
	return nil
}

// ensureDiscarded declares the discarded queue on a channel of its own
// when an older gateway declared the topology before the queue existed. A
// queue already there with other arguments (declared alongside a legacy
// dead queue, without the delivery limit) is fine as it is.
func ensureDiscarded(conn *Conn, t Topology) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w: %w", order.ErrUnavailable, err)
	}
	defer ch.Close()
	err = declareDiscarded(ch, t)
	var ae *amqp.Error
	if err != nil && !(errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed) {
		return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
	}
	return nil
}

// ListDiscarded returns the copies of discarded dead letters still kept,
// oldest discard first, with the ids, reasons and failure times they had
// when parked. The queue is left as it was (see ListDead).
func ListDiscarded(ctx context.Context, conn *Conn, topo Topology) ([]DeadLetter, error) {
	topo.setDefaults()
	if err := ensureDiscarded(conn, topo); err != nil {
		return nil, fmt.Errorf("discarded: %w", err)
	}
	out, err := ListDead(ctx, conn, topo.discarded())
	if err != nil {
		return nil, fmt.Errorf("discarded: %w", err)
	}
	return out, nil
}

// RestoreDiscarded parks the kept copies with these ids in the dead queue
// again, as they were when discarded (same id, reason, attempts), and
// returns the ids restored. Each copy leaves the discarded queue only once
// the broker confirmed it in the dead queue. An id not kept fails the
// call with order.ErrNotFound, changing nothing.
func RestoreDiscarded(ctx context.Context, conn *Conn, topo Topology, ids []string) ([]string, error) {
	topo.setDefaults()
	pub := newPublisher(conn, topo, PublisherOptions{Channels: 1})
	defer pub.Close()
	var restored []string
	err := withDeadLetters(ctx, conn, topo.discarded(), func(b *deadBatch) error {
		selected, err := b.selectLetters(ids, nil)
		if err != nil {
			return err
		}
		for _, it := range selected {
			h := copyHeaders(it.raw.Headers, func(k string) bool { return isBrokerHeader(k) || k == HeaderDiscardedAt })
			if err := pub.PublishRaw(ctx, "", topo.DeadQueue, republishing(it.raw, h)); err != nil {
				return fmt.Errorf("restore %s: %w", it.letter.ID, err)
			}
			if err := b.remove(it); err != nil {
				return fmt.Errorf("restore %s: %w", it.letter.ID, err)
			}
			restored = append(restored, it.letter.ID)
		}
		return nil
	})
	if err != nil {
		return restored, fmt.Errorf("restore discarded letters: %w", err)
	}
	return restored, nil
}

// keptCopy is the copy of a dead letter the discarded queue keeps: its
// headers with what the broker added dropped and what parsing derived from
// them (id, reason, last failure) written out, so the copy and a restored
// letter read the same.
func keptCopy(it *heldLetter, now time.Time) amqp.Publishing {
	h := copyHeaders(it.raw.Headers, isBrokerHeader)
	dl := it.letter
	h[HeaderDeadID] = dl.ID
	if dl.Reason != "" {
		h[HeaderReason] = dl.Reason
	}
	if !dl.LastFailure.IsZero() {
		if _, ok := h[HeaderLastFailure]; !ok {
			h[HeaderLastFailure] = dl.LastFailure.UTC().Format(time.RFC3339Nano)
		}
	}
	h[HeaderDiscardedAt] = now.UTC().Format(time.RFC3339Nano)
	return republishing(it.raw, h)
}
