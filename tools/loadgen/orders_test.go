package loadgen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"surge/pkg/order"
)

func TestOrdersSendsDistinctValidOrders(t *testing.T) {
	for _, one := range []string{"", "bot-1"} {
		t.Run("customer="+one, func(t *testing.T) { testDistinctOrders(t, one) })
	}
}

// testDistinctOrders checks that 200 requests name 200 orders, each
// from a new customer or, with one set, all from that one customer.
func testDistinctOrders(t *testing.T, one string) {
	var mu sync.Mutex
	ids := map[string]bool{}
	customers := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var o order.Order
		if r.Method != http.MethodPost || r.URL.Path != "/v1/orders" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "wrong route", http.StatusNotFound)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil || o.Validate() != nil {
			http.Error(w, "bad order", http.StatusBadRequest)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if order.ValidateIdempotencyKey(key) != nil {
			http.Error(w, "bad key", http.StatusBadRequest)
			return
		}
		mu.Lock()
		ids[order.IDFor(o.CustomerID, key, 0)] = true
		customers[o.CustomerID] = true
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	target := NewOrders(Orders{Client: NewOrderClient(8), BaseURL: srv.URL, SKU: "sku-1", RunID: "lg-run1", OneCustomer: one})
	gen, err := New(Options{Concurrency: 8, Requests: 200}, target)
	if err != nil {
		t.Fatal(err)
	}
	res := gen.Run(context.Background())
	if res.Counts.Of(http.StatusAccepted) != 200 {
		t.Fatalf("status counts %v, errors %q: want 200 accepted", res.Counts.Status, res.ErrorSamples)
	}
	if len(ids) != 200 {
		t.Fatalf("%d distinct order ids, want 200", len(ids))
	}
	if !ids[target.OrderIDs(0)[0]] || !ids[target.OrderIDs(199)[0]] {
		t.Fatal("OrderIDs does not name the orders the server saw")
	}
	if want := map[bool]int{true: 1, false: 200}[one != ""]; len(customers) != want {
		t.Fatalf("%d distinct customers, want %d", len(customers), want)
	}
	if one != "" && !customers[one] {
		t.Fatalf("customers %v, want only %q", customers, one)
	}
}

func TestOrdersBodyIsJSON(t *testing.T) {
	o := NewOrders(Orders{SKU: "a.b-c_1", Qty: 3, RunID: "r"})
	var got order.Order
	if err := json.Unmarshal(o.Body(nil, 42), &got); err != nil {
		t.Fatal(err)
	}
	if want := (order.Order{SKU: "a.b-c_1", Qty: 3, CustomerID: "r-42"}); got != want {
		t.Fatalf("body decodes to %+v, want %+v", got, want)
	}
}

func TestReadProcMemory(t *testing.T) {
	m, err := ReadProcMemory(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if m.PeakRSSMB <= 0 || m.RSSMB <= 0 || m.RSSMB > m.PeakRSSMB {
		t.Fatalf("memory %+v: want 0 < rss <= peak", m)
	}
	if _, err := ReadProcMemory(-1); err == nil {
		t.Fatal("reading a pid that cannot exist succeeded")
	}
	before, err := ReadProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if after, _ := ReadProcCPU(os.Getpid()); after > before {
			break // spinning showed up as CPU time
		}
	}
	if after, _ := ReadProcCPU(os.Getpid()); after <= before {
		t.Fatalf("cpu time stayed at %v s after spinning", before)
	}
	m1, err := ReadMachineCPU()
	if err != nil || m1.Busy <= 0 || m1.Total < m1.Busy {
		t.Fatalf("machine cpu %+v, %v: want 0 < busy <= total", m1, err)
	}
}

func TestInfoField(t *testing.T) {
	info := "# Memory\r\nused_memory:123456\r\nused_memory_human:120.56K\r\n"
	if v, err := infoField(info, "used_memory"); err != nil || v != 123456 {
		t.Fatalf("used_memory = %d, %v; want 123456", v, err)
	}
	if _, err := infoField(info, "maxmemory"); err == nil {
		t.Fatal("missing field found")
	}
}
