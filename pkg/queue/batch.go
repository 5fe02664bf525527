package queue

import (
	"encoding/json"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// ContentTypeOrders is the content type of a message carrying several
// orders, which the publisher sends when publishes arrive while its window
// of messages awaiting a confirm is full (see coalesce.go). Its body is
//
//	{"orders":[{"id":"<order id>","order":{...an order as JSON...},"headers":{"k":"v"}}, ...]}
//
// with at most MaxBatch entries. "headers" holds the order's own string
// headers (the trace context); the message's headers apply to every
// order. The consumer hands each entry to the handler as its own Delivery
// (see Delivery); a retry or dead letter of one entry is republished as a
// single-order message (ContentTypeJSON), so a failing order travels
// alone from its first failure on.
const ContentTypeOrders = "application/vnd.surge.orders+json"

// MaxBatch bounds the orders in one message: 64 orders of about 150 bytes
// stay far below any frame size, and a redelivered batch repeats at most
// 63 orders already processed (they are duplicates the worker skips).
const MaxBatch = 64

// batchEntry is one order of a batched message.
type batchEntry struct {
	ID      string            `json:"id"`
	Order   json.RawMessage   `json:"order"`
	Headers map[string]string `json:"headers,omitempty"`
}

type batchBody struct {
	Orders []batchEntry `json:"orders"`
}

// appendBatch encodes pending publishes as a batched body.
func appendBatch(buf []byte, batch []*pendingPublish) ([]byte, error) {
	buf = append(buf, `{"orders":[`...)
	for i, pp := range batch {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"id":`...)
		buf = appendJSONString(buf, pp.id)
		buf = append(buf, `,"order":`...)
		buf = append(buf, pp.body...)
		if h := stringHeaders(pp.headers); len(h) > 0 {
			enc, err := json.Marshal(h)
			if err != nil {
				return nil, fmt.Errorf("encode headers of order %s: %w", pp.id, err)
			}
			buf = append(buf, `,"headers":`...)
			buf = append(buf, enc...)
		}
		buf = append(buf, '}')
	}
	return append(buf, "]}"...), nil
}

// appendJSONString appends s quoted. Order ids are validated (printable
// ASCII without quotes or backslashes), so this is for them only; others
// go through json.Marshal.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			enc, _ := json.Marshal(s)
			return append(buf, enc...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// stringHeaders keeps the string-valued headers, the only ones an order
// carries inside a batch (the trace context is strings).
func stringHeaders(h amqp.Table) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// decodeBatch reads a batched body. An empty batch, or more than MaxBatch
// entries, is malformed: no publisher sends them.
func decodeBatch(body []byte) ([]batchEntry, error) {
	var b batchBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("decode batch: %w: %w", order.ErrInvalid, err)
	}
	if len(b.Orders) == 0 || len(b.Orders) > MaxBatch {
		return nil, fmt.Errorf("decode batch: %w: %d orders (want 1-%d)", order.ErrInvalid, len(b.Orders), MaxBatch)
	}
	return b.Orders, nil
}

// isBatch tells whether a message carries several orders.
func isBatch(contentType string) bool { return contentType == ContentTypeOrders }

// splitPublishings turns a batched message into one single-order message
// per order, each with the message's headers (after drop) plus its own,
// for replays of a batch the broker dead-lettered whole.
func splitPublishings(d amqp.Delivery, drop func(string) bool) ([]amqp.Publishing, error) {
	entries, err := decodeBatch(d.Body)
	if err != nil {
		return nil, err
	}
	out := make([]amqp.Publishing, 0, len(entries))
	for _, e := range entries {
		part := entryDelivery(d, e, drop)
		out = append(out, republishing(part, part.Headers))
	}
	return out, nil
}

// entryDelivery is the single-order view of one entry of a batched
// message: its body, id and headers, the message's other properties. It
// carries no acknowledger: a part is settled through its batch.
func entryDelivery(d amqp.Delivery, e batchEntry, drop func(string) bool) amqp.Delivery {
	part := d
	part.Acknowledger = nil
	part.ContentType = ContentTypeJSON
	part.MessageId = e.ID
	part.Body = e.Order
	h := copyHeaders(d.Headers, drop)
	for k, v := range e.Headers {
		h[k] = v
	}
	part.Headers = h
	return part
}
