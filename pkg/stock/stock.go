// Package stock keeps a SKU's units in Redis Cluster: avail, open
// reservations and sold, all under the SKU's hash tag so that each
// transition is one atomic Lua script (see lua/). It turns the scripts'
// return codes into order's domain errors.
package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/lua"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// Client is the part of a Redis client the stock scripts need.
// *redis.ClusterClient satisfies it.
type Client interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
}

var _ Client = (*redis.ClusterClient)(nil)

// Options tunes a Stock. The zero value means the defaults.
type Options struct {
	// StateTTL is how long the per-order state that makes the scripts
	// idempotent is kept: the idempotency window. Default 24h; it is kept
	// in whole seconds, at least one (Redis refuses EX 0, and a script
	// failing there would have moved units already).
	StateTTL time.Duration
	// WaitReplicas, when above 0, makes Reserve wait until that many
	// replicas acknowledged a new reservation (WAIT on the connection that
	// ran the script), which narrows the window in which a failover can
	// lose it. When they do not acknowledge within WaitTimeout, Reserve
	// fails and the caller undoes the reservation (Undo). Needs a cluster
	// client. Default 0: off. Undo always waits, for this many replicas
	// and at least one (see Undo).
	WaitReplicas int
	// WaitTimeout bounds that wait. Default 50ms.
	WaitTimeout time.Duration
	// UndoWaitTimeout bounds Undo's wait for the replicas. It is off the
	// accepting path (an undo follows a failure), so it may be longer than
	// WaitTimeout: a replica late to acknowledge turns a "not taken"
	// answer into an unknown outcome. Default 250ms.
	UndoWaitTimeout time.Duration
	// Masters finds the master of a key, for Undo's WAIT (WAIT covers only
	// the writes of its own connection). Default: the client New was given,
	// when it can (*redis.ClusterClient); give the cluster client here when
	// that one is an autopipeliner. Without one, every Undo fails.
	Masters MasterFinder
	// UndoneTTL is how long an order undone by its first request (Undo)
	// stays closed to retries that claimed before that request forgot its
	// idempotency record. Default 60s. The nonce of the undone call is
	// refused for StateTTL, whatever this says.
	UndoneTTL time.Duration
}

func (o *Options) setDefaults() {
	if o.StateTTL <= 0 {
		o.StateTTL = 24 * time.Hour
	}
	o.StateTTL = max(o.StateTTL, time.Second)
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = 50 * time.Millisecond
	}
	if o.UndoWaitTimeout <= 0 {
		o.UndoWaitTimeout = 250 * time.Millisecond
	}
	if o.UndoneTTL < time.Second {
		o.UndoneTTL = time.Minute
	}
}

// Stock runs the stock scripts against Redis Cluster.
type Stock struct {
	rdb    Client
	ttl    string
	undone string
	opts   Options
}

// New returns a Stock on rdb.
func New(rdb Client, opts Options) *Stock {
	opts.setDefaults()
	if mf, ok := rdb.(MasterFinder); ok && opts.Masters == nil {
		opts.Masters = mf
	}
	return &Stock{rdb: rdb, opts: opts, ttl: seconds(opts.StateTTL), undone: seconds(opts.UndoneTTL)}
}

// seconds spells d in whole seconds, rounded up: a state must never
// expire before the record it goes with.
func seconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// LoadScripts loads every script on every master so that the hot path
// sends only EVALSHA. Nodes that restart later get the script again through
// go-redis's EVAL fallback.
func LoadScripts(ctx context.Context, rdb *redis.ClusterClient) error {
	return rdb.ForEachMaster(ctx, loadOn)
}

// Reserve moves o.Qty units of o.SKU from avail into a reservation held by
// o.ID, for a request whose idempotency claim made a new record (use
// ReserveRetry for a retry of an existing one). It returns order.ErrSoldOut (possibly with Repeat set) when fewer
// units are available, order.ErrPurchaseLimit (Repeat set for a repeat)
// when the SKU has a purchase limit and the customer's units reserved or
// committed plus o.Qty would pass it, order.ErrNotLoaded when the SKU's stock is not in
// Redis, and a wrapped Redis error otherwise, after which the script may
// have reserved anyway (a reply lost to a timeout; replicas that did not
// acknowledge in time under Options.WaitReplicas): Undo with the returned
// nonce takes such a reservation back.
func (s *Stock) Reserve(ctx context.Context, o order.Order) (order.Reservation, error) {
	return s.reserve(ctx, o, "1")
}

// ReserveRetry is Reserve for a retry, whose idempotency record existed: it
// does not reserve an order its first request undid as not taken (Undo),
// and returns order.ErrUndone instead.
func (s *Stock) ReserveRetry(ctx context.Context, o order.Order) (order.Reservation, error) {
	return s.reserve(ctx, o, "0")
}

func (s *Stock) reserve(ctx context.Context, o order.Order, newClaim string) (order.Reservation, error) {
	r := order.Reservation{Nonce: order.Nonce()}
	ks := []string{keys.Avail(o.SKU), keys.Resv(o.SKU), keys.OrderState(o.SKU, o.ID), keys.Undone(o.SKU, o.ID),
		keys.MaxPerCustomer(o.SKU), keys.CustomerUnits(o.SKU, o.CustomerID)}
	res, err := s.runReserve(ctx, ks, o.ID, o.Qty, r.Nonce, o.CustomerID, s.ttl, newClaim)
	if err != nil {
		return r, fmt.Errorf("reserve sku=%s order=%s: %w", o.SKU, o.ID, err)
	}
	if len(res) != 3 {
		return r, fmt.Errorf("reserve sku=%s: unexpected reply %v", o.SKU, res)
	}
	// The script answers avail 0 with every code but 0, 1 and 6.
	r.Avail, r.Repeat = int(res[1]), res[0] == 2 || res[0] == 3 || res[0] == 7
	switch res[0] {
	case 1, 2:
		if res[2] >= 0 {
			limit := int(res[2])
			r.MaxPerCustomer = &limit
		}
		return r, nil
	case 0:
		return r, fmt.Errorf("reserve sku=%s qty=%d avail=%d: %w", o.SKU, o.Qty, res[1], order.ErrSoldOut)
	case 3:
		return r, fmt.Errorf("reserve sku=%s: %w", o.SKU, order.ErrSoldOut)
	case 4:
		return r, fmt.Errorf("reserve sku=%s order=%s: %w", o.SKU, o.ID, order.ErrUndone)
	case 5:
		return r, fmt.Errorf("reserve sku=%s order=%s nonce=%s: this call was undone: %w", o.SKU, o.ID, r.Nonce, order.ErrUndone)
	case 6:
		return r, fmt.Errorf("reserve sku=%s qty=%d customer=%s: %w", o.SKU, o.Qty, o.CustomerID, order.ErrPurchaseLimit)
	case 7:
		return r, fmt.Errorf("reserve sku=%s order=%s: %w", o.SKU, o.ID, order.ErrPurchaseLimit)
	case -1:
		return r, fmt.Errorf("reserve sku=%s: %w", o.SKU, order.ErrNotLoaded)
	}
	return r, fmt.Errorf("reserve sku=%s: unexpected code %d", o.SKU, res[0])
}

// Commit moves a committed order's units from its reservation to sold
// (or from avail when the reservation was lost). Run it only after MySQL
// committed the order's invoice. Idempotent per order id.
func (s *Stock) Commit(ctx context.Context, sku, orderID string, qty int) (order.CommitOutcome, error) {
	ks := []string{keys.Avail(sku), keys.Resv(sku), keys.Sold(sku), keys.OrderState(sku, orderID)}
	code, err := lua.Commit.Run(ctx, s.rdb, ks, orderID, qty, s.ttl).Int64()
	if err != nil {
		return 0, fmt.Errorf("commit sku=%s order=%s: %w", sku, orderID, err)
	}
	if code < 0 {
		return 0, fmt.Errorf("commit sku=%s order=%s: %w", sku, orderID, order.ErrNotLoaded)
	}
	return order.CommitOutcome(code), nil
}

// undo is Undo's release mode (see lua/release.lua).
const undo order.ReleaseMode = "undo"

// Release returns an order's reserved units to avail and reports how many
// were released (0 when there was no reservation). Idempotent.
func (s *Stock) Release(ctx context.Context, sku, orderID string, mode order.ReleaseMode) (int, error) {
	return s.release(ctx, sku, orderID, mode, "")
}

// Undo takes back the reservation made by the Reserve call that returned
// nonce, for an order whose publish certainly failed (or whose Reserve
// failed, and may have run or still run), and marks the order undone (U)
// for Options.UndoneTTL: a retry already past its claim is refused
// (order.ErrUndone), one that claims anew after the caller forgot its
// record reserves as usual. Whatever it finds, it records nonce as undone
// for Options.StateTTL: a copy of that Reserve call reaching Redis later
// (a TCP retransmission, a resend by go-redis) reserves nothing. It
// returns the units released, 0 when that call reserved nothing (it never
// ran, or found the SKU sold out), order.ErrCommitted, or
// order.ErrNotYours when the reservation is another request's or the
// order may have been published since (a repeat marked it): then the order
// must be treated as possibly taken.
//
// The undo is only as good as it is durable: a replica promoted without it
// would bring the reservation back, and the reconciler would publish an
// order answered not taken. So Undo runs the script and WAIT on one
// connection of the SKU's master, for Options.WaitReplicas replicas and at
// least one, and fails with ErrNotReplicated (after the script ran) when
// they do not acknowledge within Options.UndoWaitTimeout: the caller must
// then treat the order as possibly taken. A master the cluster lists with
// no replica has nothing that could be promoted without the undo; there
// the undo is as durable as the master itself (see waitUndo).
func (s *Stock) Undo(ctx context.Context, sku, orderID, nonce string) (int, error) {
	return s.release(ctx, sku, orderID, undo, nonce)
}

func (s *Stock) release(ctx context.Context, sku, orderID string, mode order.ReleaseMode, nonce string) (int, error) {
	ks := []string{keys.Avail(sku), keys.Resv(sku), keys.OrderState(sku, orderID), keys.Undone(sku, orderID)}
	run := s.runRelease
	if mode == undo {
		run = s.runUndo
	}
	n, err := run(ctx, ks, orderID, string(mode), s.ttl, nonce, s.undone)
	if errors.Is(err, ErrNotReplicated) {
		// The script ran: n units are back on the master, not durably.
		return int(n), fmt.Errorf("undo sku=%s order=%s: %w", sku, orderID, err)
	}
	if err != nil {
		return 0, fmt.Errorf("release sku=%s order=%s: %w", sku, orderID, err)
	}
	switch n {
	case -1:
		return 0, fmt.Errorf("release sku=%s order=%s: %w", sku, orderID, order.ErrCommitted)
	case -2:
		return 0, fmt.Errorf("undo sku=%s order=%s: %w", sku, orderID, order.ErrNotYours)
	}
	return int(n), nil
}

// View is one consistent snapshot of a SKU in Redis.
type View struct {
	SKU string `json:"sku"`
	// Loaded is false when Redis holds no stock for the SKU.
	Loaded   bool `json:"loaded"`
	Stock    int  `json:"stock"`
	Avail    int  `json:"avail"`
	Sold     int  `json:"sold"`
	Reserved int  `json:"reserved"`
	// MaxPerCustomer is the purchase limit per customer (0: none).
	MaxPerCustomer int `json:"max_per_customer"`
	// Reservations maps order id to its open reservation.
	Reservations map[string]Held `json:"reservations,omitempty"`
}

// Held is one open reservation.
type Held struct {
	Qty        int       `json:"qty"`
	ReservedAt time.Time `json:"reserved_at"`
	// CustomerID is the order's customer ("" for a reservation made before
	// it was recorded), so the order can be published again from Redis.
	CustomerID string `json:"customer_id,omitempty"`
	// Nonce names the request that reserved.
	Nonce string `json:"-"`
	// Counted is true when the units are counted in the customer's units
	// against the SKU's purchase limit (keys.CustomerUnits).
	Counted bool `json:"counted,omitempty"`
	// MaxPerCustomer is the purchase limit the order was reserved under (0:
	// none), nil for a counted reservation written before reservations
	// recorded their limit.
	MaxPerCustomer *int `json:"max_per_customer,omitempty"`
}

// Consistent reports whether avail + reserved + sold == stock.
func (v View) Consistent() bool { return v.Avail+v.Reserved+v.Sold == v.Stock }

// View reads sku's stock keys in one atomic snapshot.
func (s *Stock) View(ctx context.Context, sku string) (View, error) {
	ks := []string{keys.Avail(sku), keys.Resv(sku), keys.Sold(sku), keys.Stock(sku), keys.MaxPerCustomer(sku)}
	raw, err := lua.View.Run(ctx, s.rdb, ks).Slice()
	if err != nil {
		return View{}, fmt.Errorf("view sku=%s: %w", sku, err)
	}
	return parseView(sku, raw)
}

func parseView(sku string, raw []any) (View, error) {
	v := View{SKU: sku, Reservations: map[string]Held{}}
	if len(raw) != 6 {
		return v, fmt.Errorf("view sku=%s: unexpected reply length %d", sku, len(raw))
	}
	nums := map[int]*int{0: &v.Stock, 1: &v.Avail, 2: &v.Sold, 5: &v.MaxPerCustomer}
	for i, p := range nums {
		s, ok := raw[i].(string)
		if !ok {
			continue // missing key: false in Lua, nil here
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return v, fmt.Errorf("view sku=%s: field %d: %w", sku, i, err)
		}
		*p = n
	}
	_, availSet := raw[1].(string)
	v.Loaded = availSet
	flat, _ := raw[3].([]any)
	for i := 0; i+1 < len(flat); i += 2 {
		id, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		h, err := ParseHeld(val)
		if err != nil {
			return v, fmt.Errorf("view sku=%s reservation %s: %w", sku, id, err)
		}
		v.Reservations[id] = h
		v.Reserved += h.Qty
	}
	return v, nil
}

// ParseHeld reads a reservation value "qty:reserved_ms:nonce:customer",
// followed by ":L<N>" when it is counted against the SKU's purchase limit
// of N (lua/reserve.lua; ":L" alone before reservations recorded the
// limit); values written before the nonce and customer were recorded,
// "qty:reserved_ms", are read with those empty.
func ParseHeld(val string) (Held, error) {
	f := strings.Split(val, ":")
	none := 0
	limit := &none
	counted := len(f) == 5 && strings.HasPrefix(f[4], "L")
	if counted {
		limit = nil
		if f[4] != "L" {
			n, err := strconv.Atoi(f[4][1:])
			if err != nil || n <= 0 {
				return Held{}, fmt.Errorf("malformed reservation limit %q", val)
			}
			limit = &n
		}
		f = f[:4]
	}
	if len(f) != 2 && len(f) != 4 {
		return Held{}, fmt.Errorf("malformed reservation %q", val)
	}
	qty, err := strconv.Atoi(f[0])
	if err != nil {
		return Held{}, fmt.Errorf("malformed reservation qty %q: %w", val, err)
	}
	ms, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Held{}, fmt.Errorf("malformed reservation time %q: %w", val, err)
	}
	h := Held{Qty: qty, ReservedAt: time.UnixMilli(ms).UTC(), Counted: counted, MaxPerCustomer: limit}
	if len(f) == 4 {
		h.Nonce, h.CustomerID = f[2], f[3]
	}
	return h, nil
}

// State returns the per-order state of orderID on sku's slot (see
// keys.OrderState) or "" when none.
func (s *Stock) State(ctx context.Context, sku, orderID string) (string, error) {
	st, err := s.rdb.Get(ctx, keys.OrderState(sku, orderID)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("order state sku=%s order=%s: %w", sku, orderID, err)
	}
	return st, nil
}
