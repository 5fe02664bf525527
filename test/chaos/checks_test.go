//go:build chaos

package chaos

import (
	"surge/internal/testkit"

	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// mysqlSold reads products.sold.
func (p *pipeline) mysqlSold(sku string) int {
	p.t.Helper()
	prod, err := p.db.Product(context.Background(), sku)
	if err != nil {
		p.t.Fatal(err)
	}
	return prod.Sold
}

// waitSold waits until MySQL has sold at least n units.
func (p *pipeline) waitSold(sku string, n int, timeout time.Duration) {
	p.t.Helper()
	testkit.WaitFor(p.t, fmt.Sprintf("mysql to sell %d units", n), timeout, func() (bool, error) {
		prod, err := p.db.Product(context.Background(), sku)
		return err == nil && prod.Sold >= n, err
	})
}

// drain waits until every order the sale saw accepted is final in MySQL.
func (p *pipeline) drain(s *sale) {
	p.t.Helper()
	ids := s.acceptedIDs()
	testkit.WaitFor(p.t, "every accepted order to be final in MySQL", 90*time.Second, func() (bool, error) {
		c, err := testkit.OrderStatuses(context.Background(), p.db, ids)
		return err == nil && c["invoiced"]+c["rejected"] == len(ids), err
	})
}

// checkSale asserts the invariants after a sale that went past its stock
// and a reconcile: no oversell, no double invoice, every 202 final, all
// the stock sold, Redis consistent and equal to MySQL, no request hung.
func (p *pipeline) checkSale(sku string, stock int, s *sale) {
	t := p.t
	t.Helper()
	ctx := context.Background()
	var inv struct {
		N, Units, Distinct int
	}
	err := p.db.DB().QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(qty), 0), COUNT(DISTINCT order_id)
		FROM invoices WHERE sku = ?`, sku).Scan(&inv.N, &inv.Units, &inv.Distinct)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Units > stock {
		t.Errorf("oversold: %d units invoiced, stock %d", inv.Units, stock)
	}
	if inv.N != inv.Distinct {
		t.Errorf("%d invoices for %d distinct orders: an order was invoiced twice", inv.N, inv.Distinct)
	}
	if inv.Units != stock {
		t.Errorf("%d units invoiced, want all %d sold", inv.Units, stock)
	}
	ids := s.acceptedIDs()
	c, err := testkit.OrderStatuses(context.Background(), p.db, ids)
	if err != nil {
		t.Fatal(err)
	}
	if c["invoiced"]+c["rejected"] != len(ids) {
		t.Errorf("%d orders answered 202, but MySQL has %d invoiced and %d rejected of them",
			len(ids), c["invoiced"], c["rejected"])
	}
	v, err := p.stock.View(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Consistent() || v.Sold != p.mysqlSold(sku) || v.Stock != stock || v.Reserved != 0 {
		t.Errorf("redis after reconcile: stock %d avail %d reserved %d sold %d; mysql sold %d, stock %d",
			v.Stock, v.Avail, v.Reserved, v.Sold, p.mysqlSold(sku), stock)
	}
	s.mu.Lock()
	hung, unexpected := s.hung, s.unexpected
	s.mu.Unlock()
	if hung > 0 {
		t.Errorf("%d requests hung past %s instead of failing cleanly", hung, clientTimeout)
	}
	if len(unexpected) > 0 {
		t.Errorf("unexpected answers: %s", strings.Join(unexpected[:min(5, len(unexpected))], "; "))
	}
	// Orders Redis refuses are answered 503 outcome_unknown while the
	// SKU's master is recent (failoverDoubt); then 409.
	deadline := time.Now().Add(2 * failoverDoubt)
	st := p.postOne(sku, "after-"+sku)
	for st == http.StatusServiceUnavailable && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		st = p.postOne(sku, "after-"+sku)
	}
	if st != http.StatusConflict {
		t.Errorf("an order after the sale got %d, want 409 sold_out", st)
	}
}

// postOne places one order and returns the status code.
func (p *pipeline) postOne(sku, customer string) int {
	p.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url+"/v1/orders",
		strings.NewReader(`{"sku":"`+sku+`","qty":1,"customer_id":"`+customer+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "one")
	resp, err := apiClient(p.t).Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// dbNow reads MySQL's clock, so order times can be compared with it.
func (p *pipeline) dbNow() string {
	p.t.Helper()
	var now string
	if err := p.db.DB().QueryRowContext(context.Background(), "SELECT CAST(NOW(3) AS CHAR)").Scan(&now); err != nil {
		p.t.Fatal(err)
	}
	return now
}

// invoicedBetween lists the orders of sku MySQL invoiced between from
// and to (MySQL times).
func (p *pipeline) invoicedBetween(sku, from, to string) []string {
	p.t.Helper()
	var ids []string
	err := p.db.DB().SelectContext(context.Background(), &ids, `SELECT order_id FROM orders
		WHERE sku = ? AND status = 'invoiced' AND created_at BETWEEN ? AND ?`, sku, from, to)
	if err != nil {
		p.t.Fatal(err)
	}
	return ids
}

// uncommitted returns the orders among ids whose state in Redis is not C.
func (p *pipeline) uncommitted(sku string, ids []string) ([]string, error) {
	var out []string
	for _, id := range ids {
		st, err := p.stock.State(context.Background(), sku, id)
		if err != nil {
			return nil, err
		}
		if st != "C" {
			out = append(out, id+"="+st)
		}
	}
	return out, nil
}

// quiesce waits until the work queue and the retry tiers have held no
// message for a few polls in a row: every retried delivery is settled.
func (p *pipeline) quiesce() {
	p.t.Helper()
	conn, err := amqp.Dial(p.cfg.AMQP.URL)
	if err != nil {
		p.t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		p.t.Fatal(err)
	}
	defer ch.Close()
	topo := p.cfg.AMQP.Topology()
	queues := append([]string{topo.Queue}, topo.RetryQueues()...)
	empty := 0
	testkit.WaitFor(p.t, "the work queue and the retry tiers to empty", 60*time.Second, func() (bool, error) {
		for _, q := range queues {
			st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil {
				return false, err
			}
			if st.Messages > 0 {
				empty = 0
				return false, fmt.Errorf("%s holds %d messages", q, st.Messages)
			}
		}
		empty++
		return empty >= 5, nil
	})
}

// checkCommitsRetried checks the worker's ride through a failover before
// any reconcile: an order MySQL invoiced while the master was dead could
// not be committed in Redis then, so the worker retried the delivery until
// the duplicate path committed it on the promoted master. Call it once the
// queues are quiet; it returns how many such orders there were.
func (p *pipeline) checkCommitsRetried(sku string, ids []string) int {
	p.t.Helper()
	left, err := p.uncommitted(sku, ids)
	if err != nil {
		p.t.Fatal(err)
	}
	if len(left) > 0 {
		p.t.Errorf("orders invoiced while the master was dead, still not committed in Redis once the queues "+
			"are quiet (the worker did not retry their commit): %v", left)
	}
	return len(ids)
}
