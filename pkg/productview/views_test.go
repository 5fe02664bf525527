package productview

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/apitest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/cache"
	"surge/pkg/httpapi"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// countingSource counts the product queries that reach MySQL.
type countingSource struct {
	Source
	queries atomic.Int32
}

func (c *countingSource) Product(ctx context.Context, sku string) (store.Product, error) {
	c.queries.Add(1)
	return c.Source.Product(ctx, sku)
}

// productServer serves GET /v1/products/{sku} from its own products cache
// on its own Redis client: one gateway process, with its request ids.
func productServer(t *testing.T, db Source) *httptest.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A generous wait: this test counts queries, and a loaded machine
	// must not turn a slow rebuild into 503s.
	p := New(testenv.Redis(t), db, cache.Options{Wait: 30 * time.Second}, log)
	t.Cleanup(p.Close)
	api := &httpapi.Server{Log: log}
	h := api.Handler()
	api.Handle("GET /v1/products/{sku}", api.Products(p))
	srv := httptest.NewServer(httpapi.RequestIDs(h))
	t.Cleanup(srv.Close)
	return srv
}

// productFixture creates a product in a fresh database (10 in stock) and
// loads it into Redis with 3 units reserved, so Redis says 7 available
// where MySQL says 10.
func productFixture(t *testing.T, rdb *redis.ClusterClient) (*store.Store, string) {
	t.Helper()
	ctx := context.Background()
	db, _ := testkit.Store(t)
	sku := testkit.StockSKU(t, db, rdb, "prod-", 10, testkit.Product{Name: "Flash kettle", PriceCents: 2499})
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Product(sku), keys.ProductLease(sku)) })
	st := stock.New(rdb, stock.Options{})
	if _, err := st.Reserve(ctx, order.Order{ID: testenv.Unique("o-"), SKU: sku, Qty: 3, CustomerID: "c"}); err != nil {
		t.Fatal(err)
	}
	return db, sku
}

// A cold product read by 2,000 concurrent requests spread over four
// gateway processes costs MySQL one query, and every request gets the
// view, with available from Redis.
func TestColdProductCostsOneQuery(t *testing.T) {
	rdb := testenv.Redis(t)
	db, sku := productFixture(t, rdb)
	src := &countingSource{Source: db}
	servers := make([]*httptest.Server, 4)
	for i := range servers {
		servers[i] = productServer(t, src)
	}
	client := &http.Client{Transport: apitest.Transport(t, &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512})}
	want := order.ProductView{SKU: sku, Name: "Flash kettle", PriceCents: 2499, Available: 7}

	const requests = 2000
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan string, requests)
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.Get(servers[i%len(servers)].URL + "/v1/products/" + sku)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var got order.ProductView
			if err := json.Unmarshal(raw, &got); err != nil || resp.StatusCode != 200 || got != want {
				errs <- resp.Status + " " + string(raw)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("request failed: %s", e)
	}
	if n := src.queries.Load(); n != 1 {
		t.Fatalf("%d MySQL product queries for %d cold requests, want 1", n, requests)
	}
}

// Unknown SKUs answer 404 unknown_sku (and are cached as misses); invalid
// ones 400 without a lookup.
func TestProductErrors(t *testing.T) {
	rdb := testenv.Redis(t)
	db, _ := productFixture(t, rdb)
	src := &countingSource{Source: db}
	srv := productServer(t, src)
	unknown := testenv.Unique("nope-")
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Product(unknown)) })
	for _, tt := range []struct {
		sku     string
		status  int
		code    string
		invalid bool // a SKU the contract does not allow, on purpose
	}{
		{unknown, 404, "unknown_sku", false},
		{unknown, 404, "unknown_sku", false},
		{"bad%20sku", 400, "invalid_request", true},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/products/"+tt.sku, nil)
		if tt.invalid {
			req = apitest.Invalid(req)
		}
		resp, err := apitest.Client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || body.Error.Code != tt.code {
			t.Errorf("GET %s: %d %q, want %d %q", tt.sku, resp.StatusCode, body.Error.Code, tt.status, tt.code)
		}
	}
	if n := src.queries.Load(); n != 1 {
		t.Errorf("%d MySQL queries, want 1 (the miss is cached, the invalid SKU never looked up)", n)
	}
}

// countingAvail counts the avail reads: one per refresh.
type countingAvail struct {
	availReader
	reads atomic.Int32
}

func (c *countingAvail) Get(ctx context.Context, key string) *redis.StringCmd {
	c.reads.Add(1)
	return c.availReader.Get(ctx, key)
}

// A burst of sales on one SKU costs one refresh per interval, and the
// view ends with the avail of after the last sale.
func TestRefreshBurstIsSpacedAndEndsCurrent(t *testing.T) {
	rdb := testenv.Redis(t)
	db, sku := productFixture(t, rdb)
	ctx := context.Background()
	p := New(rdb, db, cache.Options{Wait: 30 * time.Second}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(p.Close)
	p.every = time.Hour // within this test, a second refresh can only follow the first once it ends
	if _, err := p.Product(ctx, sku); err != nil {
		t.Fatal(err)
	}
	reads := &countingAvail{availReader: p.avail}
	p.avail = reads
	for i := range 200 {
		if err := rdb.Set(ctx, keys.Avail(sku), 100-i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		p.Refresh(ctx, sku)
	}
	// The first refresh runs at once; the 199 after it wait for the interval.
	deadline := time.Now().Add(10 * time.Second)
	for reads.reads.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := reads.reads.Load(); n != 1 {
		t.Fatalf("%d refreshes for a burst of 200 sales within one interval, want 1 so far", n)
	}
	p.mu.Lock()
	again := p.refreshing[sku]
	p.mu.Unlock()
	if !again {
		t.Fatal("no refresh due after the burst: the last sales would never show")
	}
}

// After the interval the due refresh runs and shows the last sale's avail.
func TestRefreshAfterIntervalShowsLastSale(t *testing.T) {
	rdb := testenv.Redis(t)
	db, sku := productFixture(t, rdb)
	ctx := context.Background()
	p := New(rdb, db, cache.Options{Wait: 30 * time.Second}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(p.Close)
	p.every = 50 * time.Millisecond
	if _, err := p.Product(ctx, sku); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := rdb.Set(ctx, keys.Avail(sku), 100-i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		p.Refresh(ctx, sku)
	}
	p.wg.Wait() // the loop ends once no refresh is due
	v, err := p.Product(ctx, sku)
	if err != nil || v.Available != 51 {
		t.Fatalf("view %+v %v, want available 51 (after the last sale)", v, err)
	}
}
