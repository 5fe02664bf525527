package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/store"
)

// DeadQueue is the dead-letter queue. QueueDead implements it on RabbitMQ;
// every call sees or changes the whole queue atomically and keeps the
// order of what it leaves parked.
type DeadQueue interface {
	// List returns every parked letter, oldest first.
	List(ctx context.Context) ([]queue.DeadLetter, error)
	// Replay republishes the letters with these ids (confirmed) and
	// removes them; an id not parked fails the call, changing nothing.
	Replay(ctx context.Context, ids []string) ([]queue.ReplayResult, error)
	// Discard removes the letters with these ids, with the same rule.
	Discard(ctx context.Context, ids []string) ([]string, error)
}

// QueueDead is DeadQueue on a RabbitMQ connection.
type QueueDead struct {
	Conn     *queue.Conn
	Topology queue.Topology
}

var _ DeadQueue = QueueDead{}

// List implements DeadQueue.
func (q QueueDead) List(ctx context.Context) ([]queue.DeadLetter, error) {
	return queue.ListDead(ctx, q.Conn, q.Topology)
}

// Replay implements DeadQueue.
func (q QueueDead) Replay(ctx context.Context, ids []string) ([]queue.ReplayResult, error) {
	return queue.ReplayDead(ctx, q.Conn, q.Topology, ids, nil, false)
}

// Discard implements DeadQueue.
func (q QueueDead) Discard(ctx context.Context, ids []string) ([]string, error) {
	return queue.DiscardDead(ctx, q.Conn, q.Topology, ids)
}

// OrderLog is the MySQL side of dead-letter operations: the orders (the
// truth about what was invoiced) and the audit log. *store.Store
// implements it.
type OrderLog interface {
	Order(ctx context.Context, id string) (store.OrderRecord, error)
	RecordReplay(ctx context.Context, deadLetterID, orderID, actor, outcome string) error
	LastReplays(ctx context.Context, ids []string) (map[string]store.ReplayRecord, error)
}

var _ OrderLog = (*store.Store)(nil)

// DeadLetters is what operations staff do with parked orders: list, show,
// replay and discard them. opsctl and the admin API both use it.
type DeadLetters struct {
	Queue DeadQueue
	DB    OrderLog
}

// List returns every parked letter, oldest first; the queue is left as it
// was, same letters in the same order.
func (s *DeadLetters) List(ctx context.Context) ([]admin.Letter, error) {
	dead, err := s.Queue.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Letter, len(dead))
	for i, dl := range dead {
		out[i] = letterOf(dl)
	}
	return out, nil
}

// Show returns one parked letter. An id that is not parked wraps
// order.ErrNotFound, saying how it left the queue when the audit log
// knows.
func (s *DeadLetters) Show(ctx context.Context, id string) (admin.LetterDetail, error) {
	if err := admin.ValidateLetterIDs([]string{id}); err != nil {
		return admin.LetterDetail{}, err
	}
	dead, err := s.Queue.List(ctx)
	if err != nil {
		return admin.LetterDetail{}, err
	}
	for _, dl := range dead {
		if dl.ID == id {
			return detailOf(dl), nil
		}
	}
	msg := fmt.Sprintf("dead letter %s is not parked", id)
	if log, err := s.DB.LastReplays(ctx, []string{id}); err == nil {
		if r, ok := log[id]; ok {
			msg += fmt.Sprintf(" (%s by %s at %s)", r.Outcome, r.Actor, r.At.UTC().Format(time.RFC3339))
		}
	}
	return admin.LetterDetail{}, fmt.Errorf("%s: %w", msg, order.ErrNotFound)
}

func letterOf(dl queue.DeadLetter) admin.Letter {
	return admin.Letter{ID: dl.ID, OrderID: dl.OrderID, SKU: dl.SKU, Reason: dl.Reason, Attempts: dl.Attempts,
		FirstFailure: dl.FirstFailure, LastFailure: dl.LastFailure, LastError: dl.LastError}
}

func detailOf(dl queue.DeadLetter) admin.LetterDetail {
	d := admin.LetterDetail{Letter: letterOf(dl), Headers: map[string]any{}}
	for k, v := range dl.Headers {
		d.Headers[k] = plainHeader(v)
	}
	if json.Valid(dl.Body) {
		d.Body = json.RawMessage(dl.Body)
	} else {
		d.BodyText = strings.ToValidUTF8(string(dl.Body), "\uFFFD")
	}
	return d
}

// plainHeader turns AMQP header values into what JSON shows readably:
// byte strings as text, nested tables (x-death) as objects.
func plainHeader(v any) any {
	switch x := v.(type) {
	case []byte:
		return strings.ToValidUTF8(string(x), "\uFFFD")
	case amqp.Table:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = plainHeader(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainHeader(e)
		}
		return out
	}
	return v
}
