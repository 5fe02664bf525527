package queue

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// QueueDepth reports a queue's ready messages and consumers with a passive
// declare (unacked messages are not counted). A missing queue gives an
// error wrapping order.ErrNotFound; a broker problem, order.ErrUnavailable.
func QueueDepth(ctx context.Context, conn *Conn, queue string) (messages, consumers int, err error) {
	type result struct {
		q   amqp.Queue
		err error
	}
	res := make(chan result, 1)
	go func() {
		ch, err := conn.Channel()
		if err != nil {
			res <- result{err: err}
			return
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		res <- result{q, err}
	}()
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("queue depth %s: %w: %w", queue, order.ErrUnavailable, ctx.Err())
	}
	var aerr *amqp.Error
	switch {
	case r.err == nil:
		return r.q.Messages, r.q.Consumers, nil
	case errors.As(r.err, &aerr) && aerr.Code == amqp.NotFound:
		return 0, 0, fmt.Errorf("queue depth %s: %w", queue, order.ErrNotFound)
	case errors.Is(r.err, order.ErrUnavailable):
		return 0, 0, fmt.Errorf("queue depth %s: %w", queue, r.err)
	}
	return 0, 0, fmt.Errorf("queue depth %s: %w: %w", queue, order.ErrUnavailable, r.err)
}
