package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/apitest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/queue"
)

// dlqCall sends an admin request to the dead-letter API and decodes the
// JSON answer into out (when not nil).
func dlqCall(t *testing.T, p *pipeline, method, path, body, operator string, out any) int {
	t.Helper()
	return adminDo(t, adminRequest(p, method, path, body, operator), out)
}

// adminRequest is an admin API request with the pipeline's token.
func adminRequest(p *pipeline, method, path, body, operator string) *http.Request {
	req, _ := http.NewRequest(method, p.Admin+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.Token)
	if operator != "" {
		req.Header.Set("X-Surge-Operator", operator)
	}
	return req
}

// adminDo sends req, validated against api/openapi.yaml, and decodes the
// JSON answer into out (when not nil).
func adminDo(t *testing.T, req *http.Request, out any) int {
	t.Helper()
	resp, err := apitest.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %q is not the expected JSON: %v", req.Method, req.URL.Path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

type dlqListing struct {
	Count   int            `json:"count"`
	Letters []admin.Letter `json:"dead_letters"`
}

func dlqList(t *testing.T, p *pipeline) []admin.Letter {
	t.Helper()
	var l dlqListing
	if code := dlqCall(t, p, http.MethodGet, "/v1/admin/dlq", "", "", &l); code != http.StatusOK || l.Count != len(l.Letters) {
		t.Fatalf("list dead letters: %d %+v", code, l)
	}
	return l.Letters
}

// dlqPublisher publishes to the pipeline's exchange the way another
// publisher than the gateway would: without reserving stock.
func dlqPublisher(t *testing.T, p *pipeline) *queue.Publisher {
	t.Helper()
	conn, err := queue.Dial(context.Background(), p.Cfg.AMQP.URL, queue.DialOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	pub, err := queue.NewPublisher(conn, p.Cfg.AMQP.Topology(), queue.PublisherOptions{Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// TestPoisonAndUnknownSKUThenReplay is the first judgement: a
// poison message and an order for a SKU that does not exist land in the
// dead queue with their reasons; once the SKU exists, replaying the order
// invoices it exactly once, and replaying it again changes nothing.
func TestPoisonAndUnknownSKUThenReplay(t *testing.T) {
	p := startPipeline(t)
	ctx := context.Background()
	sku := testenv.Unique("late-")
	o := order.Order{ID: order.IDFor(sku+"-c", "k1", 0), SKU: sku, Qty: 3, CustomerID: sku + "-c"}
	pub := dlqPublisher(t, p)
	topo := p.Cfg.AMQP.Topology()
	poison := amqp.Publishing{MessageId: "poison-1", DeliveryMode: amqp.Persistent, Body: []byte(`{"sku":`)}
	if err := pub.PublishRaw(ctx, topo.Exchange, topo.RoutingKey, poison); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, o); err != nil {
		t.Fatal(err)
	}
	var letters []admin.Letter
	testkit.WaitFor(t, "two dead letters", 20*time.Second, func() (bool, error) {
		letters = dlqList(t, p)
		return len(letters) == 2, nil
	})
	reasons := map[string]admin.Letter{}
	for _, l := range letters {
		reasons[l.Reason] = l
	}
	bad, unknown := reasons[order.ReasonMalformed], reasons[order.ReasonUnknownSKU]
	if bad.OrderID != "poison-1" || unknown.OrderID != o.ID || unknown.SKU != sku || unknown.Attempts != 1 ||
		unknown.LastError == "" || unknown.FirstFailure.IsZero() {
		t.Fatalf("dead letters %+v, want one malformed (poison-1) and one unknown_sku (%s)", letters, o.ID)
	}
	var detail admin.LetterDetail
	if code := dlqCall(t, p, http.MethodGet, "/v1/admin/dlq/"+bad.ID, "", "", &detail); code != http.StatusOK || detail.BodyText != `{"sku":` {
		t.Fatalf("show poison: %d %+v", code, detail)
	}

	p.loadStock(t, sku, 10)
	var rep admin.LetterReport
	body := fmt.Sprintf(`{"ids":[%q]}`, unknown.ID)
	if code := dlqCall(t, p, http.MethodPost, "/v1/admin/dlq/replay", body, "dana", &rep); code != http.StatusOK ||
		rep.Actor != "dana" || len(rep.Items) != 1 || rep.Items[0].Outcome != admin.OutcomeReplayed {
		t.Fatalf("replay: %d %+v", code, rep)
	}
	testkit.WaitFor(t, "the replayed order's invoice", 20*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(ctx, sku)
		return n == 1, err
	})
	before := dlqSettled(t, p, sku, 3)

	// Again, by id and with --all: nothing is republished or invoiced. The
	// worker is stopped so that anything republished stays visible.
	p.stopW()
	if code := dlqCall(t, p, http.MethodPost, "/v1/admin/dlq/replay", body, "", &rep); code != http.StatusOK ||
		len(rep.Items) != 1 || rep.Items[0].Outcome != admin.OutcomeAlreadyInvoiced || rep.Actor != "admin-api" {
		t.Fatalf("second replay: %d %+v, want already_invoiced", code, rep)
	}
	if code := dlqCall(t, p, http.MethodPost, "/v1/admin/dlq/replay", `{"all":true}`, "dana", &rep); code != http.StatusOK ||
		len(rep.Items) != 1 || rep.Items[0].Outcome != admin.OutcomeSkippedMalformed {
		t.Fatalf("replay all: %d %+v, want the poison skipped", code, rep)
	}
	if n, _, err := queue.QueueDepth(ctx, dlqConn(t, p), topo.Queue); err != nil || n != 0 {
		t.Fatalf("work queue holds %d messages (%v): a replay republished an invoiced order", n, err)
	}
	if after := dlqSettled(t, p, sku, 3); after != before {
		t.Fatalf("second replay changed the state: %+v -> %+v", before, after)
	}
	if a := get(t, p.URL+"/v1/orders/"+o.ID); a.Status != http.StatusOK || a.State != string(order.StatusInvoiced) {
		t.Fatalf("order status %d %q, want invoiced", a.Status, a.State)
	}

	if code := dlqCall(t, p, http.MethodPost, "/v1/admin/dlq/discard", fmt.Sprintf(`{"ids":[%q]}`, bad.ID), "dana", &rep); code != http.StatusOK ||
		rep.Items[0].Outcome != admin.OutcomeDiscarded {
		t.Fatalf("discard poison: %d %+v", code, rep)
	}
	if left := dlqList(t, p); len(left) != 0 {
		t.Fatalf("dead letters left: %+v", left)
	}
	var audit []string
	if err := p.DB.DB().Select(&audit, "SELECT CONCAT(dead_letter_id, ' ', outcome, ' ', actor) FROM dlq_replays ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	want := []string{unknown.ID + " replayed dana", bad.ID + " discarded dana"}
	if strings.Join(audit, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log %q, want %q", audit, want)
	}
}

type dlqState struct {
	Invoices, MySQLSold, Avail, Reserved, Sold int
}

// dlqSettled reads a SKU's invoices and stock, checking that Redis and
// MySQL agree on sold units.
func dlqSettled(t *testing.T, p *pipeline, sku string, sold int) dlqState {
	t.Helper()
	ctx := context.Background()
	n, err := p.DB.InvoiceCount(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := p.DB.Product(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Avail, Reserved, Sold, Stock int }
	testkit.WaitFor(t, "Redis to settle", 10*time.Second, func() (bool, error) {
		rv, err := p.Stock.View(ctx, sku)
		v.Avail, v.Reserved, v.Sold, v.Stock = rv.Avail, rv.Reserved, rv.Sold, rv.Stock
		return err == nil && rv.Sold == prod.Sold && rv.Consistent(), fmt.Errorf("%+v vs MySQL sold %d: %v", rv, prod.Sold, err)
	})
	if prod.Sold != sold {
		t.Fatalf("MySQL sold %d, want %d", prod.Sold, sold)
	}
	return dlqState{Invoices: n, MySQLSold: prod.Sold, Avail: v.Avail, Reserved: v.Reserved, Sold: v.Sold}
}

func dlqConn(t *testing.T, p *pipeline) *queue.Conn {
	t.Helper()
	conn, err := queue.Dial(context.Background(), p.Cfg.AMQP.URL, queue.DialOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestTransientFailureRetriedThenParked: a failure that does not go away
// (here the invoices table is missing, as in a half-applied deployment)
// is retried through every tier, then parked as retries_exhausted with
// the attempt count and the last error; once fixed, a replay invoices it.
func TestTransientFailureRetriedThenParked(t *testing.T) {
	p := startPipeline(t)
	ctx := context.Background()
	sku := testenv.Unique("broken-")
	p.loadStock(t, sku, 5)
	if _, err := p.DB.DB().Exec("RENAME TABLE invoices TO invoices_away"); err != nil {
		t.Fatal(err)
	}
	a := post(t, newClient(t), p.URL, "broken-1", orderBody(sku, 2, sku))
	if a.Status != http.StatusAccepted {
		t.Fatalf("order: %d %+v", a.Status, a.Error)
	}
	var letters []admin.Letter
	testkit.WaitFor(t, "the order to exhaust its retries", 20*time.Second, func() (bool, error) {
		letters = dlqList(t, p)
		return len(letters) == 1, nil
	})
	l := letters[0]
	tiers := len(p.Cfg.AMQP.Topology().RetryDelays)
	if l.OrderID != a.OrderID || l.Reason != queue.ReasonRetriesExhausted || l.Attempts != tiers+1 ||
		!strings.Contains(l.LastError, "invoices") || !l.LastFailure.After(l.FirstFailure) {
		t.Fatalf("dead letter %+v, want %s parked after %d attempts with the last error", l, a.OrderID, tiers+1)
	}

	if _, err := p.DB.DB().Exec("RENAME TABLE invoices_away TO invoices"); err != nil {
		t.Fatal(err)
	}
	var rep admin.LetterReport
	body, _ := json.Marshal(map[string]any{"reason": queue.ReasonRetriesExhausted, "since": "1h"})
	if code := dlqCall(t, p, http.MethodPost, "/v1/admin/dlq/replay", string(body), "erin", &rep); code != http.StatusOK ||
		len(rep.Items) != 1 || rep.Items[0].Outcome != admin.OutcomeReplayed {
		t.Fatalf("replay: %d %+v", code, rep)
	}
	testkit.WaitFor(t, "the invoice", 20*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(ctx, sku)
		return n == 1, err
	})
	if s := dlqSettled(t, p, sku, 2); s.Reserved != 0 || s.Avail != 3 {
		t.Fatalf("after the replay: %+v, want the reservation committed", s)
	}
}

// TestDeadLetterAPIRefusals: the admin token is required, and mistakes
// get specific answers.
func TestDeadLetterAPIRefusals(t *testing.T) {
	p := startPipeline(t)
	req, _ := http.NewRequest(http.MethodGet, p.Admin+"/v1/admin/dlq", nil)
	resp, err := apitest.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("list without token: %d, want 401", resp.StatusCode)
	}
	type errAnswer struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	// invalid: the request breaks the document's schema on purpose (the
	// others break only rules a schema does not say).
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
		invalid                  bool
	}{
		{"show unknown id", "GET", "/v1/admin/dlq/01NOSUCHLETTER", "", 404, "not_found", false},
		{"replay nothing", "POST", "/v1/admin/dlq/replay", `{}`, 400, "invalid_request", false},
		{"replay unknown id", "POST", "/v1/admin/dlq/replay", `{"ids":["01NOSUCHLETTER"]}`, 404, "not_found", false},
		{"replay ids and all", "POST", "/v1/admin/dlq/replay", `{"ids":["x"],"all":true}`, 400, "invalid_request", false},
		{"bad since", "POST", "/v1/admin/dlq/replay", `{"since":"last week"}`, 400, "invalid_request", true},
		{"unknown field", "POST", "/v1/admin/dlq/replay", `{"everything":true}`, 400, "invalid_request", true},
		{"discard nothing", "POST", "/v1/admin/dlq/discard", `{"ids":[]}`, 400, "invalid_request", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a errAnswer
			req := adminRequest(p, tc.method, tc.path, tc.body, "")
			if tc.invalid {
				req = apitest.Invalid(req)
			}
			if got := adminDo(t, req, &a); got != tc.status || a.Error.Code != tc.code || a.Error.Message == "" {
				t.Fatalf("%d %+v, want %d %s with a message", got, a, tc.status, tc.code)
			}
		})
	}
	if l := dlqList(t, p); len(l) != 0 {
		t.Fatalf("dead letters after refusals: %+v", l)
	}
}
