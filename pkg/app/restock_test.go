package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/apitest"
	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/internal/testkit"
)

// putStock sends PUT /v1/admin/stock/{sku} through the admin listener and
// returns the answer, whatever its status.
func (p *pipeline) putStock(t *testing.T, sku string, n int) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, p.Admin+"/v1/admin/stock/"+sku, strings.NewReader(fmt.Sprintf(`{"stock":%d}`, n)))
	req.Header.Set("Authorization", "Bearer "+p.Token)
	return do(t, apitest.Client(t), req)
}

// startGatewayOnly is a pipeline with no worker: accepted orders stay
// reserved in Redis until the test starts one (startWorker).
func startGatewayOnly(t *testing.T) *pipeline {
	t.Helper()
	c := commonConfig(t)
	url, g := startGateway(t, c)
	return &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: openDB(t, c.MySQL.DSN), Stock: g.Stock, Cfg: c}
}

// TestRestockBelowReservedRefused: three accepted orders hold 6 units in
// Redis, none invoiced yet (MySQL has sold nothing). A restock to 5 is
// refused with 409 conflict naming what is sold, reserved and the lowest
// stock allowed, and changes neither MySQL nor Redis; a restock to 6
// passes; every accepted order is then invoiced, none refused by MySQL.
func TestRestockBelowReservedRefused(t *testing.T) {
	p := startGatewayOnly(t)
	sku := testenv.Unique("restock-")
	p.loadStock(t, sku, 10)
	c := newClient(t)
	var ids []string
	for i := range 3 {
		a := post(t, c, p.URL, fmt.Sprint("k", i), orderBody(sku, 2, fmt.Sprint(sku, "-", i)))
		if a.Status != http.StatusAccepted {
			t.Fatalf("order %d: %+v", i, a)
		}
		ids = append(ids, a.OrderID)
	}
	before := snapshot(t, p, sku)
	a := p.putStock(t, sku, 5)
	if a.Status != http.StatusConflict || a.Error.Code != "conflict" {
		t.Fatalf("restock to 5 under 6 reserved units: %d %+v, want 409 conflict", a.Status, a.Error)
	}
	for _, want := range []string{"sold 0", "reserved 6", "at least 6"} {
		if !strings.Contains(a.Error.Message, want) {
			t.Errorf("message %q does not say %q", a.Error.Message, want)
		}
	}
	if after := snapshot(t, p, sku); after.Stock != before.Stock || after.Redis.Stock != before.Redis.Stock || after.Redis.Avail != before.Redis.Avail {
		t.Fatalf("a refused restock changed the SKU: before %+v, after %+v", before, after)
	}
	if a := p.putStock(t, sku, 6); a.Status != http.StatusOK {
		t.Fatalf("restock to 6 under 6 reserved units: %d %+v, want 200", a.Status, a.Error)
	}
	startWorker(t, p.Cfg)
	waitRestockSettled(t, p, ids)
	if st, err := testkit.OrderStatuses(context.Background(), p.DB, ids); err != nil || st["invoiced"] != 3 {
		t.Fatalf("statuses %v (%v), want the 3 accepted orders invoiced", st, err)
	}
}

// TestRestockDownRacingOrders: buyers order one unit each while the
// operator lowers the stock step by step through the admin API. Every
// restock either passes or is refused with 409; at no moment is avail
// below zero; once a worker runs, every accepted order is invoiced (none
// refused by MySQL because of a restock) and MySQL sold no more than the
// stock.
func TestRestockDownRacingOrders(t *testing.T) {
	p := startGatewayOnly(t)
	sku := testenv.Unique("restock-race-")
	p.loadStock(t, sku, 60)
	c := newClient(t)
	var mu sync.Mutex
	var ids []string
	var next atomic.Int64
	var buyers, watch sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		buyers.Go(func() {
			for {
				n := next.Add(1)
				a := post(t, c, p.URL, fmt.Sprint("k", n), orderBody(sku, 1, fmt.Sprint(sku, "-", n)))
				switch {
				case a.Status == http.StatusAccepted:
					mu.Lock()
					ids = append(ids, a.OrderID)
					mu.Unlock()
				case a.Status == http.StatusConflict && a.Error.Code == "sold_out":
					return
				default:
					t.Errorf("order %d: %+v", n, a)
					return
				}
			}
		})
	}
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := p.Stock.View(context.Background(), sku)
			if err != nil || v.Avail < 0 {
				t.Errorf("during the race: stock=%d avail=%d sold=%d reserved=%d (%v)", v.Stock, v.Avail, v.Sold, v.Reserved, err)
				return
			}
		}
	})
	var loaded, refused int
	for n := 55; n >= 0; n -= 5 {
		switch a := p.putStock(t, sku, n); a.Status {
		case http.StatusOK:
			loaded++
		case http.StatusConflict:
			refused++
		default:
			t.Fatalf("restock to %d: %d %+v", n, a.Status, a.Error)
		}
	}
	buyers.Wait()
	close(stop)
	watch.Wait()
	startWorker(t, p.Cfg)
	waitRestockSettled(t, p, ids)
	st, err := testkit.OrderStatuses(context.Background(), p.DB, ids)
	prod, perr := p.DB.Product(context.Background(), sku)
	if err != nil || perr != nil || st["invoiced"] != len(ids) || prod.Sold > prod.Stock {
		t.Fatalf("%d accepted: statuses %v (%v), product %+v (%v), restocks passed %d, refused %d",
			len(ids), st, err, prod, perr, loaded, refused)
	}
	t.Logf("%d accepted, all invoiced; final stock %d; restocks passed %d, refused %d", len(ids), prod.Stock, loaded, refused)
}

// waitSettled waits until MySQL holds every order of ids, invoiced or
// rejected.
func waitRestockSettled(t *testing.T, p *pipeline, ids []string) {
	t.Helper()
	testkit.WaitFor(t, "accepted orders settled", 60*time.Second, func() (bool, error) {
		st, err := testkit.OrderStatuses(context.Background(), p.DB, ids)
		if err != nil {
			return false, err
		}
		return st["invoiced"]+st["rejected"] == len(ids), fmt.Errorf("%v of %d", st, len(ids))
	})
}
