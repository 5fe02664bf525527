package naivesql

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"surge/internal/testenv"
	"surge/pkg/store"
	"surge/tools/loadgen"
)

func newServer(t *testing.T) (*httptest.Server, loadgen.Ledger) {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, testenv.MySQLDSN(t), store.Options{MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&Server{DB: s.DB().DB, Log: slog.Default()}).Handler())
	t.Cleanup(srv.Close)
	return srv, loadgen.Ledger{DB: s.DB().DB}
}

// A hundred buyers race for ten units: exactly ten win, each with its
// invoice, and the rest hear "sold out".
func TestNaiveFlashSaleNeverOversells(t *testing.T) {
	srv, ledger := newServer(t)
	ctx := context.Background()
	client := loadgen.NewHTTPClient(16)
	if err := (loadgen.StockAPI{Client: client, BaseURL: srv.URL}).Load(ctx, "hot", 10, 250, 0); err != nil {
		t.Fatal(err)
	}
	gen, err := loadgen.New(loadgen.Options{Concurrency: 16, Requests: 100},
		loadgen.NewOrders(loadgen.Orders{Client: loadgen.NewOrderClient(16), BaseURL: srv.URL, SKU: "hot", RunID: "naive"}))
	if err != nil {
		t.Fatal(err)
	}
	res := gen.Run(ctx)
	books, err := ledger.Books(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	check := loadgen.Verify(loadgen.CheckInput{Stock: 10, Qty: 1, Counts: res.Counts, Books: books})
	if !check.OK {
		t.Fatalf("naive flash sale: %q (errors %q)", check.Problems, res.ErrorSamples)
	}
	var amount int64
	if err := ledger.DB.QueryRow("SELECT SUM(amount_cents) FROM invoices WHERE sku = 'hot'").Scan(&amount); err != nil || amount != 2500 {
		t.Fatalf("invoiced %d cents (%v), want 10 x 250", amount, err)
	}
}

func TestNaiveRefusesBadInput(t *testing.T) {
	srv, _ := newServer(t)
	for _, c := range []struct{ body, key string }{
		{`{"sku":"hot","qty":0,"customer_id":"c"}`, "k"},
		{`{"sku":"hot","qty":1,"customer_id":"c"}`, ""},
		{`not json`, "k"},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/orders", bytes.NewBufferString(c.body))
		req.Header.Set("Idempotency-Key", c.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("body %s key %q: status %d, want 400", c.body, c.key, resp.StatusCode)
		}
	}
}
