// Package gateway accepts orders: it claims the idempotency record,
// reserves stock with one Lua script, publishes the order with a publisher
// confirm, and only then reports it accepted. When the publish fails the
// reservation is released, so nothing stays reserved for an order the
// client was told to retry.
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

// Reserver holds stock for orders. *stock.Stock implements it.
type Reserver interface {
	Reserve(ctx context.Context, o order.Order) (stock.Reservation, error)
	Release(ctx context.Context, sku, orderID string, mode stock.ReleaseMode) (int, error)
}

// Claimer keeps idempotency records. *idem.Records implements it; Claim
// also spends the customer's rate budget and returns an error wrapping
// order.ErrRateLimited when it is empty. soldOut records a new claim as
// answered sold out; claiming such a record again returns an error
// wrapping order.ErrSoldOut.
type Claimer interface {
	Claim(ctx context.Context, o order.Order, soldOut bool) (first bool, err error)
	Forget(ctx context.Context, orderID string) error
}

// Publisher hands an order to the queue and returns once the broker
// confirmed it. *queue.Publisher implements it.
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
	// CleanupTimeout bounds the release after a failed publish, which runs
	// even when the client went away. Default 2s.
	CleanupTimeout time.Duration
	// SoldOut, when set, answers new orders for a SKU seen sold out moments
	// ago without the reserve script (see SoldOutHints); OnSoldOutCached,
	// when set, is called for each such answer.
	SoldOut         *SoldOutHints
	OnSoldOutCached func()
}

// Accepted is the answer to an accepted order.
type Accepted struct {
	OrderID string       `json:"order_id"`
	Status  order.Status `json:"status"`
	SKU     string       `json:"sku"`
	Qty     int          `json:"qty"`
}

// Accept validates o, derives its id from the customer and idemKey, and
// reserves and publishes it. Errors wrap order's sentinels: ErrInvalid,
// ErrRateLimited, ErrIdempotencyMismatch, ErrSoldOut, ErrUnknownSKU, ErrUnavailable.
func (s *Service) Accept(ctx context.Context, o order.Order, idemKey string) (Accepted, error) {
	if err := order.ValidateIdempotencyKey(idemKey); err != nil {
		return Accepted{}, err
	}
	if err := o.Validate(); err != nil {
		return Accepted{}, err
	}
	o.ID = order.IDFor(o.CustomerID, idemKey)
	now := s.now()
	hinted := s.SoldOut.SoldOut(o.SKU, now)
	first, err := s.Idem.Claim(ctx, o, hinted)
	if err != nil {
		return Accepted{}, unavailableUnless(err, order.ErrIdempotencyMismatch, order.ErrRateLimited, order.ErrSoldOut)
	}
	if hinted && first {
		// Recorded as answered sold out: a retry gets this answer again.
		if s.OnSoldOutCached != nil {
			s.OnSoldOutCached()
		}
		return Accepted{}, fmt.Errorf("sku %q had no unit left moments ago: %w", o.SKU, order.ErrSoldOut)
	}
	res, err := s.Stock.Reserve(ctx, o)
	if !res.Repeat && (err == nil || errors.Is(err, order.ErrSoldOut)) {
		s.SoldOut.Observe(o.SKU, res.Avail, now)
	}
	if err != nil {
		return Accepted{}, s.reserveFailed(ctx, o, first, err)
	}
	o.AcceptedAtMs = s.now().UnixMilli()
	if err := s.Queue.Publish(ctx, o); err != nil {
		s.publishFailed(ctx, o, first, res.Repeat, err)
		return Accepted{}, fmt.Errorf("publish order=%s: %w: %w", o.ID, order.ErrUnavailable, err)
	}
	// One line per accepted order, carrying the id the worker and the
	// reconciler log too; sold-out answers (the bulk of a flash sale) are
	// counted by metrics, not logged.
	s.log().Info("order accepted", "order_id", o.ID, "sku", o.SKU, "qty", o.Qty, "repeat", res.Repeat)
	return Accepted{OrderID: o.ID, Status: order.StatusAccepted, SKU: o.SKU, Qty: o.Qty}, nil
}

// reserveFailed maps a failed reservation to the client's answer and undoes
// the idempotency claim when the order did not come to exist.
func (s *Service) reserveFailed(ctx context.Context, o order.Order, first bool, err error) error {
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
	s.forget(ctx, o, first)
	return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
}

// publishFailed releases a reservation this request made. A repeat leaves
// the reservation alone: the first request may have published it.
func (s *Service) publishFailed(ctx context.Context, o order.Order, first, repeat bool, cause error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cleanupTimeout())
	defer cancel()
	if !repeat {
		if _, err := s.Stock.Release(cctx, o.SKU, o.ID, stock.Forget); err != nil {
			// The reservation stays until the reconciler's grace period
			// releases it: stock is late, never lost.
			s.log().Error("release after failed publish", "order_id", o.ID, "sku", o.SKU, "err", err)
		}
	}
	s.forget(cctx, o, first)
	s.log().Warn("publish failed", "order_id", o.ID, "sku", o.SKU, "err", cause)
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
