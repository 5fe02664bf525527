package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"surge/pkg/order"
)

// outcome is a result without its invoice id, which differs between runs.
type outcome struct {
	Status    order.Status
	Reason    string
	Duplicate bool
	Amount    int64
	Invoiced  bool
	Err       string
}

func outcomeOf(r BatchResult) outcome {
	return outcome{Status: r.Status, Reason: r.Reason, Duplicate: r.Duplicate,
		Amount: r.AmountCents, Invoiced: r.Status == order.StatusInvoiced, Err: errName(r.Err)}
}

func item(id, sku string, qty int, fence int64) BatchItem {
	return BatchItem{Order: ord(id, sku, qty), Fence: fence}
}

var (
	errUnknown = order.ErrUnknownSKU.Error()
	errStale   = order.ErrStaleFence.Error()
	errInvalid = order.ErrInvalid.Error()
)

func inv(amount int64) outcome {
	return outcome{Status: order.StatusInvoiced, Amount: amount, Invoiced: true}
}
func rej() outcome            { return outcome{Status: order.StatusRejected, Reason: order.ReasonCompensated} }
func dup(o outcome) outcome   { o.Duplicate = true; return o }
func failed(e string) outcome { return outcome{Err: e} }

type batchCase struct {
	name     string
	products []Product
	before   []BatchItem
	items    []BatchItem
	want     []outcome
	wantSold map[string]int
}

var batchCases = []batchCase{{
	name:     "mixed SKUs",
	products: []Product{{SKU: "A", Stock: 3, PriceCents: 100}, {SKU: "B", Stock: 2, PriceCents: 50}},
	items: []BatchItem{item("a1", "A", 2, 0), item("b1", "B", 1, 0), item("a2", "A", 1, 0),
		item("b2", "B", 2, 0), item("a3", "A", 1, 0)},
	want:     []outcome{inv(200), inv(50), inv(100), rej(), rej()},
	wantSold: map[string]int{"A": 3, "B": 1},
}, {
	name:     "sold-out boundary inside the batch",
	products: []Product{{SKU: "A", Stock: 5, PriceCents: 10}},
	items: []BatchItem{item("o1", "A", 2, 1), item("o2", "A", 2, 1), item("o3", "A", 2, 1),
		item("o4", "A", 1, 1), item("o5", "A", 1, 1)},
	want:     []outcome{inv(20), inv(20), rej(), inv(10), rej()},
	wantSold: map[string]int{"A": 5},
}, {
	name:     "duplicates inside the batch",
	products: []Product{{SKU: "A", Stock: 2, PriceCents: 10}},
	items: []BatchItem{item("o1", "A", 1, 0), item("o1", "A", 1, 0), item("o2", "A", 2, 0),
		item("o2", "A", 2, 0), item("o3", "A", 1, 0)},
	want:     []outcome{inv(10), dup(inv(10)), rej(), dup(rej()), inv(10)},
	wantSold: map[string]int{"A": 2},
}, {
	name:     "duplicates across batches",
	products: []Product{{SKU: "A", Stock: 3, PriceCents: 10}},
	before:   []BatchItem{item("o1", "A", 1, 0), item("o2", "A", 5, 0)},
	items:    []BatchItem{item("o1", "A", 1, 0), item("o2", "A", 5, 0), item("o3", "A", 2, 0)},
	want:     []outcome{dup(inv(10)), dup(rej()), inv(20)},
	wantSold: map[string]int{"A": 3},
}, {
	name:     "unknown SKU item",
	products: []Product{{SKU: "A", Stock: 2, PriceCents: 10}},
	items: []BatchItem{item("o1", "A", 1, 0), item("o2", "ghost", 1, 2), item("o3", "A", 1, 0),
		item("o2", "ghost", 1, 2)},
	want:     []outcome{inv(10), failed(errUnknown), inv(10), failed(errUnknown)},
	wantSold: map[string]int{"A": 2},
}, {
	name:     "stale fence item",
	products: []Product{{SKU: "A", Stock: 4, PriceCents: 10}},
	before:   []BatchItem{item("o1", "A", 1, 9)},
	items: []BatchItem{item("o1", "A", 1, 3), item("o2", "A", 1, 1), item("o1", "A", 1, 9),
		item("o3", "A", 1, 0)},
	want:     []outcome{failed(errStale), inv(10), dup(inv(10)), inv(10)},
	wantSold: map[string]int{"A": 3},
}, {
	name:     "every item fenced: duplicate, new, stale",
	products: []Product{{SKU: "A", Stock: 4, PriceCents: 10}},
	before:   []BatchItem{item("o1", "A", 1, 5), item("o4", "A", 1, 9)},
	items: []BatchItem{item("o1", "A", 1, 7), item("o2", "A", 1, 1), item("o3", "A", 1, 1),
		item("o4", "A", 1, 8)},
	want:     []outcome{dup(inv(10)), inv(10), inv(10), failed(errStale)},
	wantSold: map[string]int{"A": 4},
}, {
	name:     "a stale worker's batch, every item fenced below its newer holder",
	products: []Product{{SKU: "A", Stock: 5, PriceCents: 10}},
	before:   []BatchItem{item("o1", "A", 1, 9), item("o2", "A", 1, 9)},
	items:    []BatchItem{item("o1", "A", 1, 3), item("o2", "A", 1, 4)},
	want:     []outcome{failed(errStale), failed(errStale)},
	wantSold: map[string]int{"A": 2},
}, {
	name:     "invalid item",
	products: []Product{{SKU: "A", Stock: 4, PriceCents: 10}},
	items:    []BatchItem{item("o1", "A", 0, 0), item("o2", "A", 1, 0)},
	want:     []outcome{failed(errInvalid), inv(10)},
	wantSold: map[string]int{"A": 1},
}}

// runner applies items the way one mode does and returns their results.
type runner func(t *testing.T, s *Store, items []BatchItem) []BatchResult

func viaProcess(t *testing.T, s *Store, items []BatchItem) []BatchResult {
	out := make([]BatchResult, len(items))
	for i, it := range items {
		out[i].Processed, out[i].Err = s.Process(context.Background(), it.Order, it.Fence)
	}
	return out
}

func viaBatch(t *testing.T, s *Store, items []BatchItem) []BatchResult {
	t.Helper()
	out, err := s.ProcessBatch(context.Background(), items)
	if err != nil {
		t.Fatalf("ProcessBatch: %v", err)
	}
	return out
}

// TestProcessBatchMatchesProcess runs each case through Process one order
// at a time and through ProcessBatch, and expects the same outcomes and the
// same final tables from both.
func TestProcessBatchMatchesProcess(t *testing.T) {
	for _, c := range batchCases {
		t.Run(c.name, func(t *testing.T) {
			process := runCase(t, c, viaProcess)
			batch := runCase(t, c, viaBatch)
			if diff := cmp.Diff(process, batch); diff != "" {
				t.Fatalf("tables, Process (-) vs ProcessBatch (+):\n%s", diff)
			}
		})
	}
}

// tables is what a case leaves in MySQL, invoice ids blanked.
type tables struct {
	Orders []OrderRecord
	Fences []fenceRow
}

// runCase checks one mode against the case and returns the tables it
// left, for comparison across modes.
func runCase(t *testing.T, c batchCase, run runner) tables {
	t.Helper()
	ctx := context.Background()
	s := newStore(t)
	for _, p := range c.products {
		seed(t, s, p.SKU, p.Stock, p.PriceCents)
	}
	if len(c.before) > 0 {
		run(t, s, c.before)
	}
	results := run(t, s, c.items)
	got := make([]outcome, len(results))
	for i, r := range results {
		got[i] = outcomeOf(r)
		if r.InvoiceID == 0 {
			continue
		}
		rec, err := s.Order(ctx, c.items[i].Order.ID)
		if err != nil || rec.InvoiceID != r.InvoiceID {
			t.Errorf("item %d reports invoice %d, MySQL has %+v, %v", i, r.InvoiceID, rec, err)
		}
	}
	if diff := cmp.Diff(c.want, got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	for _, p := range c.products {
		if got := checkLedger(t, s, p.SKU).Sold; got != c.wantSold[p.SKU] {
			t.Errorf("sku %s sold = %d, want %d", p.SKU, got, c.wantSold[p.SKU])
		}
	}
	state := tables{Orders: allOrders(t, s), Fences: []fenceRow{}}
	for i := range state.Orders {
		state.Orders[i].InvoiceID = 0
	}
	if err := s.DB().SelectContext(ctx, &state.Fences, "SELECT order_id, fence FROM order_fences ORDER BY order_id"); err != nil {
		t.Fatalf("read fences: %v", err)
	}
	return state
}

// TestProcessBatchHighestFenceWins: when one batch carries an order under
// two fences, the newer lock holder owns it and the older item is stale.
func TestProcessBatchHighestFenceWins(t *testing.T) {
	s := newStore(t)
	seed(t, s, "A", 5, 10)
	out := viaBatch(t, s, []BatchItem{item("o1", "A", 1, 3), item("o1", "A", 1, 5)})
	got := []outcome{outcomeOf(out[0]), outcomeOf(out[1])}
	if diff := cmp.Diff([]outcome{failed(errStale), inv(10)}, got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if f := count(t, s, "SELECT fence FROM orders WHERE order_id = 'o1'"); f != 5 {
		t.Fatalf("order written with fence %d, want 5", f)
	}
}

// TestProcessBatchStaleBatchWritesNothing: a worker whose locks were all
// taken over (newer fences recorded, the newer holder still at work) has
// its whole batch refused, and neither orders, invoices, stock nor the
// recorded fences change.
func TestProcessBatchStaleBatchWritesNothing(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "A", 5, 10)
	if _, err := s.DB().ExecContext(ctx, "INSERT INTO order_fences (order_id, fence) VALUES ('o1', 9), ('o2', 9), ('o3', 9)"); err != nil {
		t.Fatal(err)
	}
	out := viaBatch(t, s, []BatchItem{item("o1", "A", 1, 3), item("o2", "A", 2, 8), item("o3", "A", 1, 1)})
	for i, r := range out {
		if !errors.Is(r.Err, order.ErrStaleFence) {
			t.Errorf("item %d: %+v, want a stale fence", i, r)
		}
	}
	if n := count(t, s, "SELECT COUNT(*) FROM orders") + count(t, s, "SELECT COUNT(*) FROM invoices"); n != 0 {
		t.Errorf("%d orders and invoices written by a stale batch", n)
	}
	if sold := checkLedger(t, s, "A").Sold; sold != 0 {
		t.Errorf("sold = %d after a stale batch, want 0", sold)
	}
	if f := count(t, s, "SELECT MIN(fence) FROM order_fences"); f != 9 {
		t.Errorf("lowest recorded fence %d, want 9 kept", f)
	}
}

func TestProcessBatchEmpty(t *testing.T) {
	s := newStore(t)
	out, err := s.ProcessBatch(context.Background(), nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("ProcessBatch(nil) = %v, %v", out, err)
	}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// TestProcessBatchStatementCount counts what one batch of fenced new
// orders on one SKU sends MySQL (docs/ARCHITECTURE.md, "Fencing a batch"):
// product check, BEGIN, fence upsert, fence and order read, products FOR
// UPDATE, guard, order insert, invoice insert, COMMIT.
func TestProcessBatchStatementCount(t *testing.T) {
	s := newStore(t)
	seed(t, s, "A", 10, 10)
	s.DB().SetMaxOpenConns(1) // one session, so its counter sees only this batch
	questions := func() int {
		var name string
		var n int
		if err := s.DB().QueryRowContext(context.Background(), "SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := questions()
	viaBatch(t, s, []BatchItem{item("o1", "A", 1, 5), item("o2", "A", 2, 6), item("o3", "A", 1, 7)})
	// The second reading counts itself once more than the first.
	if n := questions() - before - 1; n != 9 {
		t.Fatalf("%d statements for one batch, want 9", n)
	}
}

// An order id MySQL holds for another SKU's request (a key used again
// after a failover lost its record) is reported as that request's order,
// so the worker releases the newcomer's reservation, even when the
// newcomer's token is the lower: order locks are taken under their SKU, so
// the two messages were not excluded by one lock, and a stale answer would
// leave the newcomer's units reserved. On the same SKU (another quantity)
// the lock is shared, and a lower token is a holder that lost its lease:
// stale, or it would release the reservation the newer holder is about to
// commit. The same holds for Process.
func TestConflictingOrderIsReportedWhateverItsToken(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "A", 5, 10)
	seed(t, s, "B", 5, 10)
	if out := viaBatch(t, s, []BatchItem{item("o1", "A", 1, 50), item("o2", "A", 1, 50)}); out[0].Err != nil || out[1].Err != nil {
		t.Fatalf("first orders: %+v", out)
	}
	check := func(how string, res order.Processed, err error) {
		t.Helper()
		if err != nil || !res.Duplicate || res.Recorded.SKU != "A" {
			t.Fatalf("%s: another SKU's order under a held id with a lower token: %+v, %v; want it reported as the recorded order of SKU A", how, res, err)
		}
	}
	out := viaBatch(t, s, []BatchItem{item("o1", "B", 1, 7)})
	check("ProcessBatch", out[0].Processed, out[0].Err)
	res, err := s.Process(ctx, ord("o2", "B", 1), 7)
	check("Process", res, err)
	// The same order, or another quantity on the same SKU, with a lower
	// token is stale.
	if out := viaBatch(t, s, []BatchItem{item("o1", "A", 1, 7)}); !errors.Is(out[0].Err, order.ErrStaleFence) {
		t.Fatalf("the same order with a lower token: %+v, want stale", out[0])
	}
	if out := viaBatch(t, s, []BatchItem{item("o1", "A", 2, 7)}); !errors.Is(out[0].Err, order.ErrStaleFence) {
		t.Fatalf("another quantity on the same SKU with a lower token: %+v, want stale", out[0])
	}
	if _, err := s.Process(ctx, ord("o2", "A", 3), 7); !errors.Is(err, order.ErrStaleFence) {
		t.Fatalf("Process: another quantity on the same SKU with a lower token: %v, want stale", err)
	}
	if sold := checkLedger(t, s, "B").Sold; sold != 0 {
		t.Fatalf("SKU B sold %d, want 0", sold)
	}
}
