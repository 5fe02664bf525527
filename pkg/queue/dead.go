package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// DeadLetter is one parked message, as operations see it.
type DeadLetter struct {
	// ID is stable while the message stays parked: the x-surge-dead-id
	// the worker assigned, or, for a message the broker dead-lettered
	// itself (delivery limit), "b" plus a hash of its content.
	ID      string
	OrderID string
	// SKU is empty when the body is not an order, or is a batch of
	// orders on several SKUs.
	SKU string
	// OrderIDs lists the orders of a batched message (ContentTypeOrders)
	// the broker dead-lettered whole (its delivery limit); empty for a
	// single-order letter. OrderID is then the message's id. A replay
	// republishes each of them as a single-order message.
	OrderIDs []string
	// Reason is x-surge-reason, or the broker's reason ("delivery_limit",
	// "rejected", ...) for a message it dead-lettered.
	Reason       string
	LastError    string
	Attempts     int
	FirstFailure time.Time
	LastFailure  time.Time
	Body         []byte
	// Headers are the message headers, without the broker's
	// x-delivery-count (which changes at every listing).
	Headers amqp.Table
}

// ReplayResult reports one selected dead letter of ReplayDead.
type ReplayResult struct {
	ID      string
	OrderID string
	// Replayed is true once the copy was confirmed and the dead letter
	// removed; false in a dry run or when Err is set.
	Replayed bool
	Err      error
}

// ListDead returns every message in the dead queue, oldest first, and
// leaves the queue exactly as it was.
//
// It takes all messages with manual acks and requeues them in delivery
// order. On RabbitMQ 3.10 (measured) a quorum queue serves requeued
// messages before the others, in the order they were requeued, so taking
// the whole queue and requeuing it in order keeps the order; taking only a
// prefix would move it behind earlier requeues, which is why nothing here
// reads part of the queue. Dead-letter operations hold a broker-side lock
// (an exclusive queue named DeadQueue + ".ops-lock") so two of them never
// interleave; one that cannot take it within 5s fails with
// order.ErrConflict. Messages are held in memory while listed.
func ListDead(ctx context.Context, conn *Conn, topo Topology) ([]DeadLetter, error) {
	var out []DeadLetter
	err := withDeadLetters(ctx, conn, topo, func(b *deadBatch) error {
		for _, it := range b.items {
			out = append(out, it.letter)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// ReplayDead republishes the selected dead letters, oldest first, to the
// order exchange with attempts and failure headers reset (HeaderReplayOf
// names the dead letter), removing each from the dead queue only after the
// broker confirmed its copy. The others stay, in order. A letter is
// selected when its ID is in ids (if any) and filter accepts it (if set);
// giving neither is refused with order.ErrInvalid. An id not in the queue
// fails the whole call with order.ErrNotFound, changing nothing; so does
// dryRun, which only reports the selection. After a failed publish the
// remaining letters are left parked and the error is returned with the
// results so far.
func ReplayDead(ctx context.Context, conn *Conn, topo Topology, ids []string,
	filter func(DeadLetter) bool, dryRun bool) ([]ReplayResult, error) {
	if len(ids) == 0 && filter == nil {
		return nil, fmt.Errorf("replay dead letters: %w: give ids or a filter", order.ErrInvalid)
	}
	topo.setDefaults()
	pub := newPublisher(conn, topo, PublisherOptions{Channels: 1})
	defer pub.Close()
	var results []ReplayResult
	err := withDeadLetters(ctx, conn, topo, func(b *deadBatch) error {
		selected, err := b.selectLetters(ids, filter)
		if err != nil || dryRun {
			for _, it := range selected {
				results = append(results, ReplayResult{ID: it.letter.ID, OrderID: it.letter.OrderID})
			}
			return err
		}
		for _, it := range selected {
			r := ReplayResult{ID: it.letter.ID, OrderID: it.letter.OrderID}
			r.Err = replayOne(ctx, pub, topo, it)
			if r.Err == nil {
				r.Err = b.remove(it)
			}
			r.Replayed = r.Err == nil
			results = append(results, r)
			if r.Err != nil {
				return fmt.Errorf("replay %s: %w", it.letter.ID, r.Err)
			}
		}
		return nil
	})
	if err != nil {
		return results, fmt.Errorf("replay dead letters: %w", err)
	}
	return results, nil
}

// DiscardDead removes the dead letters with the given ids and returns the
// ids removed, in queue order; the others stay, in order. Each letter
// leaves the dead queue only once the broker confirmed its copy in the
// discarded queue (Topology.DiscardedQueue), which keeps it DiscardedTTL
// for RestoreDiscarded. Unknown ids fail the call with order.ErrNotFound,
// changing nothing.
func DiscardDead(ctx context.Context, conn *Conn, topo Topology, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("discard dead letters: %w: no ids given", order.ErrInvalid)
	}
	topo.setDefaults()
	if err := ensureDiscarded(conn, topo); err != nil {
		return nil, fmt.Errorf("discard dead letters: %w", err)
	}
	pub := newPublisher(conn, topo, PublisherOptions{Channels: 1})
	defer pub.Close()
	var removed []string
	err := withDeadLetters(ctx, conn, topo, func(b *deadBatch) error {
		selected, err := b.selectLetters(ids, nil)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, it := range selected {
			if err := pub.PublishRaw(ctx, "", topo.DiscardedQueue(), keptCopy(it, now)); err != nil {
				return fmt.Errorf("keep a copy of %s: %w", it.letter.ID, err)
			}
			if err := b.remove(it); err != nil {
				return fmt.Errorf("discard %s: %w", it.letter.ID, err)
			}
			removed = append(removed, it.letter.ID)
		}
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("discard dead letters: %w", err)
	}
	return removed, nil
}

// replayOne publishes the copies of one dead letter, each confirmed: the
// letter, or each order of a batched letter on its own (a crash midway
// repeats some orders on the next replay, which the worker skips as
// duplicates).
func replayOne(ctx context.Context, pub *Publisher, topo Topology, it *heldLetter) error {
	msgs, err := replayPublishings(it)
	if err != nil {
		return err
	}
	for _, msg := range msgs {
		if err := pub.PublishRaw(ctx, topo.Exchange, topo.RoutingKey, msg); err != nil {
			return err
		}
	}
	return nil
}

// replayPublishings are fresh copies of a dead letter: surge's failure
// headers and the broker's death records are dropped. A batched letter
// gives one single-order message per order.
func replayPublishings(it *heldLetter) ([]amqp.Publishing, error) {
	drop := func(k string) bool { return isBrokerHeader(k) || strings.HasPrefix(k, "x-surge-") }
	msgs := []amqp.Publishing{republishing(it.raw, copyHeaders(it.raw.Headers, drop))}
	if isBatch(it.raw.ContentType) {
		var err error
		if msgs, err = splitPublishings(it.raw, drop); err != nil {
			return nil, fmt.Errorf("dead letter %s: %w", it.letter.ID, err)
		}
	}
	for i := range msgs {
		msgs[i].Headers[HeaderReplayOf] = it.letter.ID
	}
	return msgs, nil
}

// selectLetters picks the held letters matching ids and filter, in queue
// order, or fails naming the ids that are not parked.
func (b *deadBatch) selectLetters(ids []string, filter func(DeadLetter) bool) ([]*heldLetter, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = false
	}
	var selected []*heldLetter
	for _, it := range b.items {
		if _, ok := want[it.letter.ID]; ok {
			want[it.letter.ID] = true
		} else if len(ids) > 0 {
			continue
		}
		if filter == nil || filter(it.letter) {
			selected = append(selected, it)
		}
	}
	var missing []string
	for _, id := range ids {
		if !want[id] && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("dead letters %s: %w", strings.Join(missing, ", "), order.ErrNotFound)
	}
	return selected, nil
}
