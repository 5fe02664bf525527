// Package queue is surge's RabbitMQ side: the order topology, a
// connection that redials, a confirmed publisher for the gateway, a
// consumer with retry tiers for the worker, and the dead-letter
// operations behind opsctl.
//
// # Topology
//
// Both the gateway and the worker declare it at start-up (Topology.Declare,
// idempotent). With default names:
//
//	orders (topic) --order.created--> orders.created (quorum, x-delivery-limit 20)
//	    orders.created --dead-letter, at-least-once--> orders.dlx (fanout) --> orders.dead (quorum)
//	orders.retry (direct) --orders.retry.1s--> orders.retry.1s (quorum, TTL 1s)
//	    orders.retry.1s --expired--> orders --order.created--> orders.created
//	(same for the 10s and 60s tiers)
//
// A retry is published to the orders.retry direct exchange with the tier
// queue's name as routing key; when its TTL expires the broker
// dead-letters it (at-least-once) back to orders with order.created.
// Queues that dead-letter use x-overflow reject-publish, which RabbitMQ
// requires for at-least-once dead-lettering. The work queue's delivery
// limit only catches messages that crash the worker every time; normal
// failures go through Delivery.Retry and Delivery.Dead, which publish a
// confirmed copy before acking the original (a crash in between
// duplicates, never loses; the worker is idempotent by order id). A copy
// the broker refuses is published again, after 100ms and then twice as
// long each time up to 5s, while the original stays unacked: it is never
// put back for that, so the other orders of a batch stay settled, none
// is handled again or gets a second copy, and the delivery limit is not
// spent. Only a lost channel, or a consumer stopping past its drain, gives
// the original back to the broker, as a crash does.
//
// # Messages
//
// An order travels as JSON (ContentTypeJSON, MessageId = the order id),
// or together with the orders published while the publisher's window of
// messages awaiting a confirm was full, in one ContentTypeOrders message
// (coalesce.go, batch.go). The consumer
// hands each order of such a message to the handler as its own Delivery
// and acks the message once every one is settled; retries and dead
// letters of one order are single-order messages.
//
// # Headers
//
// Retried and parked messages carry HeaderAttempts, HeaderLastError,
// HeaderFirstFailure and HeaderLastFailure; parked ones add HeaderReason
// and HeaderDeadID.
//
// # Failures
//
// Every broker-side failure a caller may retry wraps order.ErrUnavailable.
// A publish is answered within the publisher's bound (Publisher.Bound),
// whatever it waits for; the gateway's order status builds on it.
package queue
