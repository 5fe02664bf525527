//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"surge/pkg/stock"
)

// skuEnd is a SKU's books at the end: MySQL's and Redis's.
type skuEnd struct {
	mysqlStock, mysqlSold int
	invQty, invoices      int
	redisErr              string
	rStock, rAvail, rSold int
	resv                  map[string]int // order id -> units still reserved
}

// orderEnd is an order id's end state.
type orderEnd struct {
	row            bool // MySQL has an orders row
	sku, customer  string
	status, reason string
	qty            int
	invoices       int
	invQty         int
	state          string // Redis's per-order state (A, S, C, X), "" when none
	resv           int    // units still reserved in Redis
	dead           string // reason it is parked in the dead-letter queue
}

// invoiced tells whether MySQL invoiced the order (an invoice, or its row
// says so).
func (o *orderEnd) invoiced() bool { return o.invoices > 0 || o.status == "invoiced" }

type endState struct {
	skus       map[string]*skuEnd
	orders     map[string]*orderEnd
	byCustomer map[string][]string // customer -> ids of its MySQL orders
}

func (e *endState) order(id string) *orderEnd {
	if e.orders[id] == nil {
		e.orders[id] = &orderEnd{}
	}
	return e.orders[id]
}

// readEnd reads MySQL, Redis and the dead-letter queue once the sale is
// over, drained and reconciled.
func readEnd(ctx context.Context, p *pipeline, skus []string, h *history) (*endState, error) {
	e := &endState{skus: map[string]*skuEnd{}, orders: map[string]*orderEnd{}, byCustomer: map[string][]string{}}
	for _, s := range skus {
		e.skus[s] = &skuEnd{resv: map[string]int{}}
	}
	steps := []func() error{
		func() error { return readProducts(ctx, p, e, skus) },
		func() error { return readOrders(ctx, p, e, skus) },
		func() error { return readInvoices(ctx, p, e, skus) },
		func() error { return readDead(p, e) },
		func() error {
			for _, s := range skus {
				readRedisSKU(ctx, p.rdb, s, e)
			}
			return nil
		},
		func() error { resolveIDs(h, e); return nil },
		func() error { return readOrderStates(ctx, p.rdb, e, h) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// noteCustomer files id under its customer, for an order found outside
// MySQL (a dead letter, a reservation): resolveIDs then names an op's
// order from there too.
func (e *endState) noteCustomer(id, sku, customer string) {
	o := e.order(id)
	if o.row || customer == "" {
		return
	}
	if o.customer == "" {
		e.byCustomer[customer] = append(e.byCustomer[customer], id)
	}
	o.customer, o.sku = customer, sku
}

func inSKUs(skus []string) (string, []any) {
	args := make([]any, len(skus))
	for i, s := range skus {
		args[i] = s
	}
	return strings.TrimSuffix(strings.Repeat("?,", len(skus)), ","), args
}

func readProducts(ctx context.Context, p *pipeline, e *endState, skus []string) error {
	in, args := inSKUs(skus)
	rows, err := p.db.QueryContext(ctx, "SELECT sku, stock, sold FROM products WHERE sku IN ("+in+")", args...)
	if err != nil {
		return fmt.Errorf("read products: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sku string
		var stock, sold int
		if err := rows.Scan(&sku, &stock, &sold); err != nil {
			return err
		}
		e.skus[sku].mysqlStock, e.skus[sku].mysqlSold = stock, sold
	}
	return rows.Err()
}

func readOrders(ctx context.Context, p *pipeline, e *endState, skus []string) error {
	in, args := inSKUs(skus)
	rows, err := p.db.QueryContext(ctx, "SELECT order_id, sku, customer_id, qty, status, COALESCE(reason, '') FROM orders WHERE sku IN ("+in+")", args...)
	if err != nil {
		return fmt.Errorf("read orders: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var o orderEnd
		if err := rows.Scan(&id, &o.sku, &o.customer, &o.qty, &o.status, &o.reason); err != nil {
			return err
		}
		dst := e.order(id)
		o.row, o.invoices, o.invQty, o.dead = true, dst.invoices, dst.invQty, dst.dead
		*dst = o
		e.byCustomer[o.customer] = append(e.byCustomer[o.customer], id)
	}
	return rows.Err()
}

func readInvoices(ctx context.Context, p *pipeline, e *endState, skus []string) error {
	in, args := inSKUs(skus)
	rows, err := p.db.QueryContext(ctx, "SELECT order_id, sku, COUNT(*), SUM(qty) FROM invoices WHERE sku IN ("+in+") GROUP BY order_id, sku", args...)
	if err != nil {
		return fmt.Errorf("read invoices: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, sku string
		var n, qty int
		if err := rows.Scan(&id, &sku, &n, &qty); err != nil {
			return err
		}
		o := e.order(id)
		o.invoices += n
		o.invQty += qty
		e.skus[sku].invoices += n
		e.skus[sku].invQty += qty
	}
	return rows.Err()
}

// readDead peeks at the run's dead-letter queue: every message is got
// without an ack and goes back when the channel closes.
func readDead(p *pipeline, e *endState) error {
	conn, err := amqp.Dial(p.eng.mq.url())
	if err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	for {
		d, ok, err := ch.Get(p.deadQueue(), false)
		if err != nil || !ok {
			return err
		}
		var body struct {
			OrderID  string `json:"order_id"`
			SKU      string `json:"sku"`
			Customer string `json:"customer_id"`
		}
		_ = json.Unmarshal(d.Body, &body)
		if body.OrderID != "" {
			e.order(body.OrderID).dead = fmt.Sprint(d.Headers["x-surge-reason"])
			e.noteCustomer(body.OrderID, body.SKU, body.Customer)
		}
	}
}

// resolveIDs names the order of each op whose answers named none (a
// transport error, a refusal) by its customer's orders in MySQL; the
// hammer's customer has many orders, so its ops are left to the answers.
func resolveIDs(h *history, e *endState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.ops {
		if o.kind == "hammer" {
			continue
		}
		for _, id := range e.byCustomer[o.customer] {
			o.nameID(id)
		}
	}
}

// readOrderStates reads Redis's per-order state of every order of the
// history whose id is known, pipelined.
func readOrderStates(ctx context.Context, rdb *redis.ClusterClient, e *endState, h *history) error {
	h.mu.Lock()
	var ops []*op
	for _, o := range h.ops {
		if o.id != "" {
			ops = append(ops, o)
		}
	}
	h.mu.Unlock()
	for start := 0; start < len(ops); start += 500 {
		batch := ops[start:min(start+500, len(ops))]
		cmds := make([]*redis.StringCmd, len(batch))
		_, err := rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for i, o := range batch {
				cmds[i] = pl.Get(ctx, "{sku:"+o.sku+"}:ord:"+o.id)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return fmt.Errorf("read order states: %w", err)
		}
		for i, o := range batch {
			if v, err := cmds[i].Result(); err == nil {
				e.order(o.id).state = v
			}
		}
	}
	return nil
}

// readRedisSKU reads a SKU's stock keys; a failure is kept in redisErr.
func readRedisSKU(ctx context.Context, rdb *redis.ClusterClient, sku string, e *endState) {
	s, tag := e.skus[sku], "{sku:"+sku+"}:"
	ints := []*int{&s.rStock, &s.rAvail, &s.rSold}
	for i, k := range []string{"stock", "avail", "sold"} {
		n, err := rdb.Get(ctx, tag+k).Int()
		if err != nil {
			s.redisErr = fmt.Sprintf("GET %s%s: %v", tag, k, err)
			return
		}
		*ints[i] = n
	}
	resv, err := rdb.HGetAll(ctx, tag+"resv").Result()
	if err != nil {
		s.redisErr = fmt.Sprintf("HGETALL %sresv: %v", tag, err)
		return
	}
	for id, v := range resv {
		h, err := stock.ParseHeld(v)
		if err != nil {
			s.redisErr = fmt.Sprintf("reservation %s of %s: %v", id, sku, err)
			return
		}
		s.resv[id] = h.Qty
		e.order(id).resv = h.Qty
		e.noteCustomer(id, sku, h.CustomerID)
	}
}
