package config

import (
	"fmt"
	"time"

	"surge/pkg/order"
)

// Horizon is a delay after which surge invites a retry of an order, or
// settles an order it answered as unknown: a client retrying with the
// same Idempotency-Key within it must find the key's record, since a
// retry that finds none names a new order (order.IDFor), and one purchase
// could then be invoiced twice. Name is what sets it, for the error.
type Horizon struct {
	Name  string
	After time.Duration
}

// RetryAfterHorizons are the Retry-After values every gateway answers
// whatever its settings (order.RetryAfterUnavailable,
// order.RetryAfterUnknown); a program adds its own horizons to them (the
// reconciler's grace, the rate limits' waits, the confirm timeout).
func RetryAfterHorizons() []Horizon {
	return []Horizon{
		{"Retry-After of 503 unavailable", order.RetryAfterUnavailable},
		{"Retry-After of 503 outcome_unknown", order.RetryAfterUnknown},
	}
}

// IdempotencyFloor is the shortest idempotency TTL surge accepts with the
// given horizons besides RetryAfterHorizons: twice the longest one, so
// that a client that waited a whole horizon and then as long again
// (jitter, a slow network, a second answer asking it to wait) still finds
// the record, and never less than MinIdempotencyTTL. It returns the
// longest horizon too, to name it.
func IdempotencyFloor(hs ...Horizon) (time.Duration, Horizon) {
	longest := Horizon{"per-order states expire in whole seconds", MinIdempotencyTTL / 2}
	for _, h := range append(RetryAfterHorizons(), hs...) {
		if h.After > longest.After {
			longest = h
		}
	}
	return max(2*longest.After, MinIdempotencyTTL), longest
}

// CheckIdempotencyTTL refuses a SURGE_IDEMPOTENCY_TTL below
// IdempotencyFloor(hs...), naming the floor and the horizon it comes from.
func CheckIdempotencyTTL(ttl time.Duration, hs ...Horizon) error {
	floor, longest := IdempotencyFloor(hs...)
	if ttl >= floor {
		return nil
	}
	return fmt.Errorf("SURGE_IDEMPOTENCY_TTL=%v: must be at least %v, twice the longest retry horizon (%s: %v): "+
		"a retry after its record expired names a new order, so one purchase could be invoiced twice",
		ttl, floor, longest.Name, longest.After)
}

// Horizon is the reconciler's grace as a retry horizon: an order answered
// outcome_unknown that never reached RabbitMQ is published again once it
// has passed, and a retry until then must name the same order.
func (r Reconcile) Horizon() Horizon {
	return Horizon{"SURGE_RECONCILE_GRACE", r.Grace}
}
