// Package gateway accepts orders: it claims the idempotency record,
// reserves stock with one Lua script, publishes the order with a publisher
// confirm, and only then reports it accepted.
//
// Every answer tells the truth. Accepted means RabbitMQ confirmed the
// order, so a worker will invoice it. "Not taken" (ErrUnavailable and the
// 4xx errors) is answered only once this request's reservation is taken
// back or was never made, and the message is certainly in no queue: such
// an order is never invoiced. When the gateway cannot know (the publish
// was written and no confirm came, the connection dropped after the
// write, a Redis call timed out after its script may have run, or another
// request for the same order may have published it), the answer is
// ErrOutcomeUnknown and the reservation and the idempotency record stay:
// the order is either in the queue, or the reconciler publishes it again
// after its grace period, so it settles; a retry with the same key or the
// order's status then tells the settled truth.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"surge/pkg/order"
	"surge/pkg/stock"
)

// Reserver holds stock for orders. *stock.Stock implements it. Undo takes
// back the reservation made by the Reserve call that returned nonce, and
// fails (stock.ErrNotYours) when the order may have been published since.
type Reserver interface {
	Reserve(ctx context.Context, o order.Order) (stock.Reservation, error)
	Undo(ctx context.Context, sku, orderID, nonce string) (int, error)
}

// Claimer keeps idempotency records. *idem.Records implements it. Claim
// names the order of (o.CustomerID, key): the one the key named while its
// record lives, else a new one. It also spends the customer's rate budget
// and returns an error wrapping order.ErrRateLimited when it is empty.
// soldOut records a new claim as answered sold out; claiming such a
// record again returns an error wrapping order.ErrSoldOut.
//
// Existing reads, without claiming, whether the key names an order now,
// and that order's id (or the one a claim would create): after a failed
// claim it tells a new key (nothing was taken) from a retry of an order
// that may exist.
type Claimer interface {
	Claim(ctx context.Context, o order.Order, key string, soldOut bool) (orderID string, first bool, err error)
	Existing(ctx context.Context, o order.Order, key string) (orderID string, found bool, err error)
	Forget(ctx context.Context, orderID string) error
}

// Publisher hands an order to the queue and returns once the broker
// confirmed it. A failure wraps order.ErrOutcomeUnknown when the broker
// may hold the message anyway, else the message is in no queue.
// *queue.Publisher implements it.
type Publisher interface {
	Publish(ctx context.Context, o order.Order) error
}

// Catalog tells whether a SKU exists, for the rare order on a SKU whose
// stock is not in Redis. *store.Store implements it through an adapter.
type Catalog interface {
	Exists(ctx context.Context, sku string) (bool, error)
}

// Service accepts orders.
type Service struct {
	Stock   Reserver
	Idem    Claimer
	Queue   Publisher
	Catalog Catalog
	Log     *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// CleanupTimeout bounds the undo after a failed publish, which runs
	// even when the client went away. Default 2s.
	CleanupTimeout time.Duration
	// SoldOut, when set, answers new orders for a SKU seen sold out moments
	// ago without the reserve script (see SoldOutHints); OnSoldOutCached,
	// when set, is called for each such answer.
	SoldOut         *SoldOutHints
	OnSoldOutCached func()
	// OnOutcomeUnknown, when set, is called for each answer whose outcome
	// the gateway cannot know.
	OnOutcomeUnknown func()
}

// Accepted is the answer to an accepted order.
type Accepted struct {
	OrderID string       `json:"order_id"`
	Status  order.Status `json:"status"`
	SKU     string       `json:"sku"`
	Qty     int          `json:"qty"`
}

// Accept validates o, claims the order id of the customer's idemKey, and
// reserves and publishes it. Errors wrap order's sentinels: ErrInvalid,
// ErrRateLimited, ErrIdempotencyMismatch, ErrSoldOut, ErrUnknownSKU and
// ErrUnavailable (the order was not taken), or ErrOutcomeUnknown (an
// *order.UnknownOutcomeError: it may have been).
func (s *Service) Accept(ctx context.Context, o order.Order, idemKey string) (Accepted, error) {
	if err := order.ValidateIdempotencyKey(idemKey); err != nil {
		return Accepted{}, err
	}
	if err := o.Validate(); err != nil {
		return Accepted{}, err
	}
	now := s.now()
	hint := s.SoldOut.SoldOut(o.SKU, now)
	id, first, err := s.Idem.Claim(ctx, o, idemKey, hint.SoldOut)
	o.ID = id
	if err != nil {
		s.SoldOut.Abandon(o.SKU, hint)
		return Accepted{}, s.claimFailed(ctx, o, idemKey, err)
	}
	if hint.SoldOut && first {
		// Recorded as answered sold out: a retry gets this answer again.
		if s.OnSoldOutCached != nil {
			s.OnSoldOutCached()
		}
		return Accepted{}, fmt.Errorf("sku %q had no unit left moments ago: %w", o.SKU, order.ErrSoldOut)
	}
	res, err := s.Stock.Reserve(ctx, o)
	if !res.Repeat && (err == nil || errors.Is(err, order.ErrSoldOut)) {
		s.SoldOut.Observe(o.SKU, res.Avail, now)
	} else {
		s.SoldOut.Abandon(o.SKU, hint)
	}
	if err != nil {
		return Accepted{}, s.reserveFailed(ctx, o, first, res, err)
	}
	o.AcceptedAtMs = s.now().UnixMilli()
	if err := s.Queue.Publish(ctx, o); err != nil {
		return Accepted{}, s.publishFailed(ctx, o, first, res, err)
	}
	// One line per accepted order, carrying the id the worker and the
	// reconciler log too; sold-out answers (the bulk of a flash sale) are
	// counted by metrics, not logged.
	s.log().Info("order accepted", "order_id", o.ID, "sku", o.SKU, "qty", o.Qty, "repeat", res.Repeat)
	return Accepted{OrderID: o.ID, Status: order.StatusAccepted, SKU: o.SKU, Qty: o.Qty}, nil
}

// claimFailed maps a failed claim to the client's answer. A refusal (rate
// limited, another body, a repeat of a sold-out answer) passes through.
// When Redis failed, the request took nothing, but the key may already
// name an order (this is a retry): that order is not "not taken". Only a
// key with no live record is answered unavailable; otherwise, and when
// the records cannot be read, the outcome is unknown.
func (s *Service) claimFailed(ctx context.Context, o order.Order, key string, err error) error {
	for _, refusal := range []error{order.ErrIdempotencyMismatch, order.ErrRateLimited, order.ErrSoldOut} {
		if errors.Is(err, refusal) {
			return err
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cleanupTimeout())
	defer cancel()
	id, found, ferr := s.Idem.Existing(cctx, o, key)
	if ferr == nil && !found {
		return fmt.Errorf("claim: %w: %w", order.ErrUnavailable, err)
	}
	o.ID = id
	return s.unknown(o, fmt.Errorf("claim: %w", errors.Join(err, ferr)))
}

// reserveFailed maps a failed reservation to the client's answer. A Redis
// error may come after the script ran (a timeout), so the reservation it
// may have made is undone before the order is called not taken.
func (s *Service) reserveFailed(ctx context.Context, o order.Order, first bool, res stock.Reservation, err error) error {
	switch {
	case errors.Is(err, order.ErrSoldOut):
		return err
	case errors.Is(err, order.ErrNotLoaded):
		s.forget(ctx, o, first)
		exists, cerr := s.Catalog.Exists(ctx, o.SKU)
		if cerr == nil && !exists {
			return fmt.Errorf("sku %q: %w", o.SKU, order.ErrUnknownSKU)
		}
		return fmt.Errorf("sku %q stock is not loaded: %w", o.SKU, order.ErrUnavailable)
	}
	return s.notTakenOrUnknown(ctx, o, first, res.Nonce, err)
}

// publishFailed maps a failed publish to the client's answer. When the
// broker may hold the message, everything stays: the order will settle.
// Otherwise the reservation this request made is undone; a repeat made
// none, and the order it repeats may have been published by the request
// that reserved, so its outcome is unknown to this one.
func (s *Service) publishFailed(ctx context.Context, o order.Order, first bool, res stock.Reservation, err error) error {
	s.log().Warn("publish failed", "order_id", o.ID, "sku", o.SKU, "repeat", res.Repeat, "err", err)
	if errors.Is(err, order.ErrOutcomeUnknown) || res.Repeat {
		return s.unknown(o, fmt.Errorf("publish: %w", err))
	}
	return s.notTakenOrUnknown(ctx, o, first, res.Nonce, fmt.Errorf("publish: %w", err))
}

// notTakenOrUnknown undoes this request's reservation (nonce). When that
// leaves the order holding nothing, the order was not taken: the
// idempotency record is forgotten (when this request created it) and the
// answer wraps ErrUnavailable. When the reservation is not this request's
// to undo, or the undo failed, the answer is an unknown outcome.
func (s *Service) notTakenOrUnknown(ctx context.Context, o order.Order, first bool, nonce string, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cleanupTimeout())
	defer cancel()
	if _, err := s.Stock.Undo(cctx, o.SKU, o.ID, nonce); err != nil {
		s.log().Warn("reservation kept: outcome unknown", "order_id", o.ID, "sku", o.SKU, "err", err)
		return s.unknown(o, errors.Join(cause, err))
	}
	s.forget(cctx, o, first)
	return fmt.Errorf("order=%s not taken: %w: %w", o.ID, order.ErrUnavailable, cause)
}

func (s *Service) unknown(o order.Order, cause error) error {
	if s.OnOutcomeUnknown != nil {
		s.OnOutcomeUnknown()
	}
	return &order.UnknownOutcomeError{OrderID: o.ID, Cause: cause}
}

func (s *Service) forget(ctx context.Context, o order.Order, first bool) {
	if !first {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cleanupTimeout())
	defer cancel()
	if err := s.Idem.Forget(cctx, o.ID); err != nil {
		s.log().Warn("forget idempotency record", "order_id", o.ID, "err", err)
	}
}

// unavailableUnless passes err through when it wraps one of keep, and
// otherwise marks it as a dependency failure.
func unavailableUnless(err error, keep ...error) error {
	for _, k := range keep {
		if errors.Is(err, k) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) cleanupTimeout() time.Duration {
	if s.CleanupTimeout > 0 {
		return s.CleanupTimeout
	}
	return 2 * time.Second
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}
