//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/internal/testkit"
)

// TestFullClusterRefusesOrders: every master reaches maxmemory (here: a
// limit below what it holds). Under noeviction new orders are refused with
// 503 unavailable and nothing is written; a retry of an accepted order is
// answered outcome_unknown with its id (the gateway cannot claim, so it
// cannot call the order not taken); no key is lost, the order already
// accepted is still reported invoiced; once memory is back, orders pass.
func TestFullClusterRefusesOrders(t *testing.T) {
	ctx := context.Background()
	p := startPipeline(t)
	sku := testenv.Unique("chaos-full-")
	p.loadStock(sku, 10)
	first := p.order(t, sku, "buyer-1", "k1")
	if first.Status != http.StatusAccepted {
		t.Fatalf("order before the cluster fills: %+v", first)
	}
	p.waitSold(sku, 1, 30*time.Second)
	before := p.keyspace(t, sku)

	fill(t, ctx, p, "1")
	for i := range 20 {
		a := p.order(t, sku, fmt.Sprintf("late-%d", i), "k1")
		if a.Status != http.StatusServiceUnavailable || a.Error.Code != "unavailable" {
			t.Fatalf("new order on a full cluster: %+v, want 503 unavailable", a)
		}
	}
	retry := p.order(t, sku, "buyer-1", "k1")
	if retry.Status != http.StatusServiceUnavailable || retry.Error.Code != "outcome_unknown" || retry.OrderID != first.OrderID {
		t.Fatalf("retry of an accepted order on a full cluster: %+v, want 503 outcome_unknown for %s", retry, first.OrderID)
	}
	if st := p.status(t, first.OrderID); st != "invoiced" {
		t.Fatalf("status of the accepted order on a full cluster: %q, want invoiced", st)
	}
	if after := p.keyspace(t, sku); after != before {
		t.Fatalf("a full cluster changed the keys:\n before %s\n after  %s", before, after)
	}
	if c, err := testkit.OrderStatuses(context.Background(), p.db, []string{first.OrderID}); err != nil || c["invoiced"] != 1 || p.mysqlSold(sku) != 1 {
		t.Fatalf("mysql: %v %v sold %d, want the one order", c, err, p.mysqlSold(sku))
	}

	fill(t, ctx, p, "256mb")
	if a := p.order(t, sku, "buyer-2", "k1"); a.Status != http.StatusAccepted {
		t.Fatalf("order once memory is back: %+v, want 202", a)
	}
	p.waitSold(sku, 2, 30*time.Second)
}

// fill sets maxmemory on every master (the replicas ignore it), and puts
// the local setting back at cleanup.
func fill(t *testing.T, ctx context.Context, p *pipeline, limit string) {
	t.Helper()
	set := func(limit string) error {
		return p.redis.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return n.ConfigSet(ctx, "maxmemory", limit).Err()
		})
	}
	if err := set(limit); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set("256mb") })
}

// keyspace sums up the keys of sku's slot: its stock keys and every order
// state, by value. Equal summaries mean nothing was written or evicted.
func (p *pipeline) keyspace(t *testing.T, sku string) string {
	t.Helper()
	ctx := context.Background()
	v, err := p.stock.View(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	master, err := p.redis.MasterForKey(ctx, "{sku:"+sku+"}")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := master.Keys(ctx, "{sku:"+sku+"}:*").Result() // a private cluster, a handful of keys
	if err != nil {
		t.Fatal(err)
	}
	n, err := master.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("stock=%d avail=%d sold=%d reserved=%d sku keys=%d keys on the master=%d",
		v.Stock, v.Avail, v.Sold, v.Reserved, len(ks), n)
}

// answer is a POST /v1/orders answer.
type answer struct {
	Status  int    `json:"-"`
	raw     string // the body as it came
	OrderID string `json:"order_id"`
	Error   struct {
		Code string `json:"code"`
	} `json:"error"`
}

// order posts one unit of sku for customer with key.
func (p *pipeline) order(t *testing.T, sku, customer, key string) answer {
	t.Helper()
	return p.send(t, key, `{"sku":"`+sku+`","qty":1,"customer_id":"`+customer+`"}`)
}

// send posts an order's body with key and reads the answer.
func (p *pipeline) send(t *testing.T, key, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url+"/v1/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := apiClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %d: %q", resp.StatusCode, b)
	}
	a.Status, a.raw = resp.StatusCode, string(b)
	return a
}

// status reads an order's status through the gateway.
func (p *pipeline) status(t *testing.T, id string) string {
	t.Helper()
	resp, err := apiClient(t).Get(p.url + "/v1/orders/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v.Status
}
