package queue

import (
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Headers surge sets on retried and dead-lettered messages. Times are
// RFC 3339 strings with nanoseconds, in UTC.
const (
	// HeaderAttempts counts the failed processing attempts so far (int).
	HeaderAttempts = "x-surge-attempts"
	// HeaderLastError is the last failure's message, truncated.
	HeaderLastError = "x-surge-last-error"
	// HeaderFirstFailure is when processing failed the first time.
	HeaderFirstFailure = "x-surge-first-failure"
	// HeaderLastFailure is when processing failed the last time.
	HeaderLastFailure = "x-surge-last-failure"
	// HeaderReason says why a message was parked (ReasonRetriesExhausted,
	// order.ReasonMalformed, ...).
	HeaderReason = "x-surge-reason"
	// HeaderDeadID is the dead letter's stable id (a ULID), assigned when
	// it is parked.
	HeaderDeadID = "x-surge-dead-id"
	// HeaderReplayOf names the dead letter a replayed message came from.
	HeaderReplayOf = "x-surge-replay-of"
)

// ReasonRetriesExhausted is the dead-letter reason of a message that still
// failed after every retry tier.
const ReasonRetriesExhausted = "retries_exhausted"

// maxErrorLen bounds HeaderLastError: headers travel in one AMQP frame.
const maxErrorLen = 512

// ContentTypeJSON is the content type of an order message.
const ContentTypeJSON = "application/json"

// brokerHeaders are added by RabbitMQ on delivery or dead-lettering; a
// replay starts without them.
func isBrokerHeader(k string) bool {
	return k == "x-death" || k == "x-delivery-count" || strings.HasPrefix(k, "x-first-death-") ||
		strings.HasPrefix(k, "x-last-death-")
}

// headerInt reads an integer header whatever width the encoder chose.
func headerInt(h amqp.Table, key string) int {
	switch v := h[key].(type) {
	case int:
		return v
	case int8:
		return int(v)
	case int16:
		return int(v)
	case int32:
		return int(v)
	case int64:
		return int(v)
	case uint8:
		return int(v)
	case uint16:
		return int(v)
	case uint32:
		return int(v)
	}
	return 0
}

func headerString(h amqp.Table, key string) string {
	switch v := h[key].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

func headerTime(h amqp.Table, key string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, headerString(h, key))
	if err != nil {
		return time.Time{}
	}
	return t
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// truncate cuts s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// copyHeaders returns h without the keys drop rejects, so a republished
// copy never shares (and races on) the original's map.
func copyHeaders(h amqp.Table, drop func(string) bool) amqp.Table {
	out := make(amqp.Table, len(h)+6)
	for k, v := range h {
		if drop == nil || !drop(k) {
			out[k] = v
		}
	}
	return out
}

// republishing copies a delivered message's properties into a new
// publishing with the given headers.
func republishing(d amqp.Delivery, headers amqp.Table) amqp.Publishing {
	return amqp.Publishing{
		Headers:         headers,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}
