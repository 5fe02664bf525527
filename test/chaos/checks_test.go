//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
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
	waitFor(p.t, fmt.Sprintf("mysql to sell %d units", n), timeout, func() (bool, error) {
		prod, err := p.db.Product(context.Background(), sku)
		return err == nil && prod.Sold >= n, err
	})
}

// finalOrders counts the orders among ids that MySQL has, by status.
func (p *pipeline) finalOrders(ids []string) (map[string]int, error) {
	counts := map[string]int{}
	for start := 0; start < len(ids); start += 500 {
		q, args, err := sqlx.In("SELECT status, COUNT(*) FROM orders WHERE order_id IN (?) GROUP BY status",
			ids[start:min(start+500, len(ids))])
		if err != nil {
			return nil, err
		}
		rows, err := p.db.DB().QueryContext(context.Background(), q, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var status string
			var n int
			if err := rows.Scan(&status, &n); err != nil {
				rows.Close()
				return nil, err
			}
			counts[status] += n
		}
		rows.Close()
	}
	return counts, nil
}

// drain waits until every order the sale saw accepted is final in MySQL.
func (p *pipeline) drain(s *sale) {
	p.t.Helper()
	ids := s.acceptedIDs()
	waitFor(p.t, "every accepted order to be final in MySQL", 90*time.Second, func() (bool, error) {
		c, err := p.finalOrders(ids)
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
	c, err := p.finalOrders(ids)
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
	if st := p.postOne(sku, "after-"+sku); st != http.StatusConflict {
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
	resp, err := (&http.Client{Timeout: clientTimeout}).Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
