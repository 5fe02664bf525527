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
	"strings"
	"time"

	"surge/pkg/order"
	"surge/pkg/reqid"
)

// Reserver holds stock for orders. *stock.Stock implements it. Reserve is
// for a request whose claim made a new record, ReserveRetry for a retry:
// it refuses (order.ErrUndone) an order its first request undid. Undo
// takes back the reservation made by the call that returned nonce, and
// fails (order.ErrNotYours) when the order may have been published since.
// Whatever it finds, a successful Undo leaves a mark that makes any later
// copy of that call (same nonce) reserve nothing, and is durable: a
// failover cannot bring back the reservation without it; when it cannot
// say so (no replica acknowledged it in time), Undo fails.
type Reserver interface {
	Reserve(ctx context.Context, o order.Order) (order.Reservation, error)
	ReserveRetry(ctx context.Context, o order.Order) (order.Reservation, error)
	Undo(ctx context.Context, sku, orderID, nonce string) (int, error)
}

// Claimer keeps idempotency records. *idem.Records implements it.
//
// Claim names the order of (o.CustomerID, key): the order the key named
// while its record lives, else a new one (Created). It spends the
// customer's rate budget (an error wrapping order.ErrRateLimited when it
// is empty, or an *order.UnknownOutcomeError when the key names an order
// that may be taken) and refuses another body
// (order.ErrIdempotencyMismatch).
//
// Existing reads, without claiming, whether the key names an order that
// may be taken, and its id (or the one a claim would create). Forget
// deletes the record only when the claim made it.
type Claimer interface {
	Claim(ctx context.Context, o order.Order, key string) (order.Claim, error)
	Existing(ctx context.Context, o order.Order, key string) (orderID string, open bool, err error)
	Forget(ctx context.Context, c order.Claim) (bool, error)
}

// Publisher hands an order to the queue and returns once the broker
// confirmed it. A failure wraps order.ErrOutcomeUnknown when the broker
// may hold the message anyway, else the message is in no queue.
// *queue.Publisher implements it.
type Publisher interface {
	Publish(ctx context.Context, o order.Order) error
}

// Failovers tells whether the Redis master holding a SKU's keys took
// over recently: a promoted replica may lack the last writes its
// predecessor acknowledged (replication is asynchronous), an accepted
// order's reservation and state among them, until the orders those
// writes belonged to have settled. The app's adapter of
// *cluster.Promotions implements it.
type Failovers interface {
	Recent(ctx context.Context, sku string) bool
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
	// Log defaults to slog.Default().
	Log *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// CleanupTimeout bounds the undo after a failed publish, which runs
	// even when the client went away. Default 2s.
	CleanupTimeout time.Duration

	// Failovers, when set, keeps the gateway from answering "not taken"
	// (sold out, over the purchase limit) from the memory of a master that
	// took over recently: the key may name an order answered 202 whose
	// state that master never received, still on its way to be invoiced.
	// Such an answer becomes an unknown outcome.
	Failovers Failovers
	// SoldOut, when set, answers orders for a SKU sold out from a read
	// made for them, with no write (RefuseSoldOut); it learns which SKUs
	// are worth a read from Accept's reservations.
	SoldOut *SoldOut
	// Observer, when set, is told of each step and of the answers given
	// without one (metrics, tracing; see Observe to combine several).
	Observer Observer
}

// Accepted is the answer to an accepted order.
type Accepted struct {
	OrderID string       `json:"order_id"`
	Status  order.Status `json:"status"`
	SKU     string       `json:"sku"`
	Qty     int          `json:"qty"`
}

// RefuseSoldOut answers o sold out from a read of its SKU made for it,
// before anything else is done: no rate budget spent, no idempotency
// record, no reserve script (see SoldOut). It returns an error wrapping
// order.ErrSoldOut, or nil: the order goes the full way (Accept). Ask it
// first, before any budget of the caller's own (the client address's):
// the bulk of a flash sale then costs nothing else.
func (s *Service) RefuseSoldOut(ctx context.Context, o order.Order, idemKey string) error {
	if s.SoldOut == nil || order.ValidateIdempotencyKey(idemKey) != nil || o.Validate() != nil {
		return nil
	}
	err := s.SoldOut.Refuse(ctx, o, idemKey)
	if err != nil {
		s.answered(ctx, o, AnswerSoldOutSighted)
	}
	return err
}

// Accept validates o, claims the order id of the customer's idemKey, and
// reserves and publishes it. Errors wrap order's sentinels: ErrInvalid,
// ErrRateLimited, ErrIdempotencyMismatch, ErrSoldOut, ErrPurchaseLimit,
// ErrUnknownSKU and ErrUnavailable (the order was not taken), or
// ErrOutcomeUnknown (an *order.UnknownOutcomeError: it may have been).
//
// The answer, decided from what each step returned:
//
//	claim refused (budget, another body)        the refusal: not taken
//	claim failed, key names an open order      unknown outcome, that order
//	claim failed, key names none               503 unavailable
//	reserve: sold out, purchase limit          409: nothing reserved
//	  ... on a master that took over recently  unknown outcome, nothing reserved
//	reserve: a retry of an undone order        503 unavailable
//	reserve: stock not loaded                  404 unknown SKU or 503
//	reserve failed (Redis)                     undone: 503; undo failed: unknown
//	publish confirmed                          202 accepted
//	publish certainly not written              undone: 503; undo failed: unknown
//	publish may have been written              unknown outcome, order kept
func (s *Service) Accept(ctx context.Context, o order.Order, idemKey string) (Accepted, error) {
	if err := order.ValidateIdempotencyKey(idemKey); err != nil {
		return Accepted{}, err
	}
	if err := o.Validate(); err != nil {
		return Accepted{}, err
	}
	cctx := s.begin(ctx, StepClaim, o)
	c, err := s.Idem.Claim(cctx, o, idemKey)
	s.end(cctx, StepClaim, o, Result{Err: err, Claim: c})
	o.ID = c.OrderID
	if err != nil {
		return Accepted{}, s.claimFailed(ctx, o, idemKey, err)
	}
	step, reserve := StepReserve, s.Stock.Reserve
	if !c.Created {
		step, reserve = StepReserveRetry, s.Stock.ReserveRetry
	}
	rctx := s.begin(ctx, step, o)
	res, err := reserve(rctx, o)
	s.end(rctx, step, o, Result{Err: err, Reservation: res})
	if !res.Repeat && (err == nil || errors.Is(err, order.ErrSoldOut) || errors.Is(err, order.ErrPurchaseLimit)) {
		// What the script saw of the units left tells the next orders
		// whether a sighting may answer them (SoldOut).
		s.SoldOut.Observe(o.SKU, res.Avail)
	}
	if err != nil {
		return Accepted{}, s.reserveFailed(ctx, o, c, res, err)
	}
	o.AcceptedAtMs = s.Now().UnixMilli()
	// MySQL judges the order by the purchase limit Redis reserved it
	// under, not by one set after it was accepted.
	o.MaxPerCustomer = res.MaxPerCustomer
	if err := s.publish(ctx, o); err != nil {
		return Accepted{}, s.publishFailed(ctx, o, c, res, err)
	}
	// One line per accepted order, carrying the id the worker and the
	// reconciler log too; sold-out answers (the bulk of a flash sale) are
	// counted by metrics, not logged. The arguments are built only when
	// the line is written (production runs at warn).
	if s.Log.Enabled(ctx, slog.LevelInfo) {
		s.Log.Info("order accepted", "order_id", o.ID, "sku", o.SKU, "qty", o.Qty, "repeat", res.Repeat,
			"request_id", reqid.From(ctx))
	}
	return Accepted{OrderID: o.ID, Status: order.StatusAccepted, SKU: o.SKU, Qty: o.Qty}, nil
}

// publish publishes o; the observer is told how long the broker took,
// from just before the publish to its confirm.
func (s *Service) publish(ctx context.Context, o order.Order) error {
	if s.Observer == nil {
		return s.Queue.Publish(ctx, o)
	}
	pctx := s.Observer.Begin(ctx, StepPublish, o)
	start := time.Now()
	err := s.Queue.Publish(pctx, o)
	s.Observer.End(pctx, StepPublish, o, Result{Err: err, Took: time.Since(start)})
	return err
}

// claimFailed maps a failed claim to the client's answer. A refusal (rate
// limited, another body, a repeat of a sold-out answer) and an unknown
// outcome (a rate-limited retry of an order that may be taken) pass
// through.
// When Redis failed, this request took nothing, but the key may already
// name an order (this is a retry): that order is not "not taken". Only a
// key with no open record is answered unavailable; otherwise, and when
// the records cannot be read, the outcome is unknown.
func (s *Service) claimFailed(ctx context.Context, o order.Order, key string, err error) error {
	switch {
	case errors.Is(err, order.ErrOutcomeUnknown):
		if first := s.refusedBefore(ctx, o, err); first != nil {
			return first
		}
		s.answered(ctx, o, AnswerOutcomeUnknown)
		return err
	case errors.Is(err, order.ErrIdempotencyMismatch), errors.Is(err, order.ErrRateLimited):
		return err
	}
	return s.Refused(ctx, o, key, fmt.Errorf("claim: %w: %w", order.ErrUnavailable, err))
}

// refusedBefore answers a retry over its customer's budget whose key names
// an order (unknown, an *order.UnknownOutcomeError) that Redis holds as
// refused by the reserve script, which reserved nothing. Past the
// purchase limit (L), the retry gets that first answer again, not 503
// outcome_unknown, as a retry within the budget does. Sold out (S) leaves
// the key free (a retry is a new attempt): this one is refused for the
// budget, 429, not taken. Any other state (an undone order's U among
// them: its undo may yet be lost to a failover), or a failed read, leaves
// the outcome unknown (nil).
func (s *Service) refusedBefore(ctx context.Context, o order.Order, err error) error {
	var unknown *order.UnknownOutcomeError
	sr, ok := s.Stock.(StateReader)
	if !ok || !errors.As(err, &unknown) || unknown.OrderID == "" {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.CleanupTimeout)
	defer cancel()
	state, _, rerr := sr.OrderState(cctx, o.SKU, unknown.OrderID)
	switch {
	case rerr != nil:
		return nil
	case strings.HasPrefix(state, "S") && errors.Is(unknown.Cause, order.ErrRateLimited):
		return fmt.Errorf("order=%s was answered sold out, the key is free: %w", unknown.OrderID, unknown.Cause)
	case state == "L":
		return fmt.Errorf("order=%s was answered past the purchase limit: %w", unknown.OrderID, order.ErrPurchaseLimit)
	}
	return nil
}

// Refused maps a refusal decided before or at the claim (the client
// address over its budget, Redis failing) to the client's answer: cause,
// which says "not taken", when the key names no order that may be taken;
// else an unknown outcome naming that order (this request is a retry of
// it, and took nothing, but the order may be accepted).
func (s *Service) Refused(ctx context.Context, o order.Order, key string, cause error) error {
	if order.ValidateIdempotencyKey(key) != nil || o.Validate() != nil {
		return cause
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.CleanupTimeout)
	defer cancel()
	id, open, err := s.Idem.Existing(cctx, o, key)
	if err == nil && !open {
		return cause
	}
	o.ID = id
	return s.unknown(ctx, o, errors.Join(cause, err))
}

// reserveFailed maps a failed reservation to the client's answer. A Redis
// error may come after the script ran (a timeout), so the reservation it
// may have made is undone before the order is called not taken.
func (s *Service) reserveFailed(ctx context.Context, o order.Order, c order.Claim, res order.Reservation, err error) error {
	switch {
	case errors.Is(err, order.ErrSoldOut), errors.Is(err, order.ErrPurchaseLimit):
		if s.Failovers != nil && s.Failovers.Recent(ctx, o.SKU) {
			// This request reserved nothing, but the key may name an
			// order the master's predecessor accepted and this master
			// never heard of: it is not "not taken" until it settles.
			return s.unknown(ctx, o, fmt.Errorf("%w, as told by a master that took over recently", err))
		}
		return err
	case errors.Is(err, order.ErrUndone):
		// The request that made the order answered it not taken while
		// this retry was on its way: so is this one. (A call refused
		// because it was undone itself reserved nothing either.) But the
		// undo this read may be on the master only (its request then
		// answered outcome unknown): a failover could bring the
		// reservation back. This call's own undo, waited for by a replica,
		// makes it durable first; failing that, the outcome is unknown.
		if uerr := s.takeBack(ctx, o, c, res.Nonce); uerr != nil {
			return s.unknown(ctx, o, errors.Join(err, uerr))
		}
		return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
	case errors.Is(err, order.ErrNotLoaded):
		// This answer may have come from a resend of the call (go-redis
		// resends a script whose reply was lost) while the first copy is
		// still on its way: loaded by then, the stock would let that copy
		// reserve an order answered not taken. The undo leaves the call's
		// mark first, as after any failed reservation.
		if uerr := s.takeBack(ctx, o, c, res.Nonce); uerr != nil {
			return s.unknown(ctx, o, errors.Join(err, uerr))
		}
		exists, cerr := s.Catalog.Exists(ctx, o.SKU)
		if cerr == nil && !exists {
			return fmt.Errorf("sku %q: %w", o.SKU, order.ErrUnknownSKU)
		}
		return fmt.Errorf("sku %q stock is not loaded: %w", o.SKU, order.ErrUnavailable)
	}
	return s.notTakenOrUnknown(ctx, o, c, res.Nonce, err)
}

// publishFailed maps a failed publish to the client's answer. When the
// broker may hold the message, everything stays: the order will settle.
// Otherwise the reservation this request made is undone; a repeat made
// none, and the order it repeats may have been published by the request
// that reserved, so its outcome is unknown to this one.
func (s *Service) publishFailed(ctx context.Context, o order.Order, c order.Claim, res order.Reservation, err error) error {
	s.Log.Warn("publish failed", "order_id", o.ID, "sku", o.SKU, "repeat", res.Repeat,
		"request_id", reqid.From(ctx), "err", err)
	if errors.Is(err, order.ErrOutcomeUnknown) || res.Repeat {
		return s.unknown(ctx, o, fmt.Errorf("publish: %w", err))
	}
	return s.notTakenOrUnknown(ctx, o, c, res.Nonce, fmt.Errorf("publish: %w", err))
}

// notTakenOrUnknown undoes this request's reservation (nonce): the order
// then holds nothing, is marked undone, so that a retry already past its
// claim does not take it after this answer (order.ErrUndone), this
// request's reserve call is refused should a copy of it reach Redis
// later (a reserve that timed out may still be on the wire), and the
// idempotency record this request made is forgotten, so the key is free.
// The answer then wraps ErrUnavailable. When the reservation is not this
// request's to undo (a repeat may have published the order), or the undo
// failed or is not known to be durable (no replica acknowledged it: a
// promoted replica could bring the reservation back), the outcome is
// unknown and the record stays, so a retry finds the order undone.
func (s *Service) notTakenOrUnknown(ctx context.Context, o order.Order, c order.Claim, nonce string, cause error) error {
	if err := s.takeBack(ctx, o, c, nonce); err != nil {
		return s.unknown(ctx, o, errors.Join(cause, err))
	}
	return fmt.Errorf("order=%s not taken: %w: %w", o.ID, order.ErrUnavailable, cause)
}

// takeBack undoes the reservation of this request's call (nonce), leaving
// its mark, and forgets the idempotency record the claim c made. It fails,
// forgetting nothing, when the undo failed or is not known to be durable:
// the order may then be taken.
func (s *Service) takeBack(ctx context.Context, o order.Order, c order.Claim, nonce string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.CleanupTimeout)
	defer cancel()
	uctx := s.begin(cctx, StepUndo, o)
	_, err := s.Stock.Undo(uctx, o.SKU, o.ID, nonce)
	s.end(uctx, StepUndo, o, Result{Err: err})
	if err != nil {
		s.Log.Warn("reservation kept: outcome unknown", "order_id", o.ID, "sku", o.SKU, "err", err)
		return err
	}
	s.forget(cctx, o, c)
	return nil
}

func (s *Service) unknown(ctx context.Context, o order.Order, cause error) error {
	s.answered(ctx, o, AnswerOutcomeUnknown)
	return &order.UnknownOutcomeError{OrderID: o.ID, Cause: cause}
}

// forget deletes the record c made, if it made one. A record left behind
// (Redis failed) only keeps the key from a new order until it expires.
func (s *Service) forget(ctx context.Context, o order.Order, c order.Claim) {
	if !c.Created {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.CleanupTimeout)
	defer cancel()
	if _, err := s.Idem.Forget(cctx, c); err != nil {
		s.Log.Warn("forget idempotency record", "order_id", o.ID, "err", err)
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

// New returns the service s describes, its zero fields given their
// defaults: Now time.Now, CleanupTimeout 2s, Log slog.Default().
func New(s Service) *Service {
	s.setDefaults()
	return &s
}

func (s *Service) setDefaults() {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.CleanupTimeout <= 0 {
		s.CleanupTimeout = 2 * time.Second
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
}
