package ops_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/internal/testenv"
	"surge/pkg/admin"
	"surge/pkg/ops"
	"surge/pkg/order"
	"surge/pkg/queue"
)

func TestListAndShow(t *testing.T) {
	e := newDLQEnv(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	o := testOrder(e.sku, 1)
	want := []string{
		e.parkOrder(t, o, order.ReasonUnknownSKU, at),
		e.park(t, "", []byte("not json"), order.ReasonMalformed, at),
		e.parkOrder(t, testOrder(e.sku, 2), queue.ReasonRetriesExhausted, at),
	}
	for range 2 { // listing twice shows the same letters in the same order
		if diff := cmp.Diff(want, e.ids(t)); diff != "" {
			t.Fatalf("listed ids (-parked +listed):\n%s", diff)
		}
	}
	letters, err := e.svc.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := admin.Letter{ID: want[0], OrderID: o.ID, SKU: e.sku, Reason: order.ReasonUnknownSKU, Attempts: 1,
		FirstFailure: at, LastFailure: at, LastError: "cause of unknown_sku"}
	if diff := cmp.Diff(first, letters[0]); diff != "" {
		t.Errorf("first letter (-want +got):\n%s", diff)
	}

	d, err := e.svc.Show(ctx, want[1])
	if err != nil {
		t.Fatal(err)
	}
	if d.BodyText != "not json" || d.Body != nil || d.Reason != order.ReasonMalformed || d.Headers[queue.HeaderDeadID] != want[1] {
		t.Errorf("show malformed letter = %+v", d)
	}
	if d, err := e.svc.Show(ctx, want[0]); err != nil || !strings.Contains(string(d.Body), o.ID) {
		t.Errorf("show order letter = %s, %v", d.Body, err)
	}
	if _, err := e.svc.Show(ctx, "01NOSUCHLETTER"); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("show unknown id = %v, want ErrNotFound", err)
	}
}

// TestReplayIsSafeToRepeat: a replay republishes an order MySQL does not
// know yet; repeating it, or replaying another letter of the same order
// once it is invoiced, republishes nothing and says why.
func TestReplayIsSafeToRepeat(t *testing.T) {
	e := newDLQEnv(t)
	ctx := context.Background()
	o := testOrder(e.sku, 1)
	first := e.parkOrder(t, o, order.ReasonUnknownSKU, time.Now())
	twin := e.parkOrder(t, o, order.ReasonUnknownSKU, time.Now()) // parked twice (at-least-once)

	rep, err := e.svc.Replay(ctx, admin.ReplayRequest{IDs: []string{first}, Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{first + " replayed"}, outcomes(rep)); diff != "" {
		t.Errorf("first replay (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{o.ID}, e.workQueue(t)); diff != "" {
		t.Errorf("work queue (-want +got):\n%s", diff)
	}

	again, err := e.svc.Replay(ctx, admin.ReplayRequest{IDs: []string{first}, Actor: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{first + " already_replayed"}, outcomes(again)); diff != "" {
		t.Errorf("replay of a replayed letter (-want +got):\n%s", diff)
	}
	if !strings.Contains(again.Items[0].Detail, "replayed by alice") {
		t.Errorf("detail %q does not say who replayed it", again.Items[0].Detail)
	}

	e.invoice(t, o) // the worker processed the replayed order
	final, err := e.svc.Replay(ctx, admin.ReplayRequest{IDs: []string{twin, first}, Actor: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{twin + " already_invoiced", first + " already_invoiced"}
	if diff := cmp.Diff(want, outcomes(final)); diff != "" {
		t.Errorf("replay after the invoice (-want +got):\n%s", diff)
	}
	if got := e.workQueue(t); len(got) != 0 {
		t.Errorf("an invoiced order was republished: %v", got)
	}
	if got := e.ids(t); len(got) != 0 {
		t.Errorf("dead letters left: %v, want the invoiced order's twin removed", got)
	}
	wantAudit := []string{first + " replayed alice", twin + " already_invoiced carol"}
	if diff := cmp.Diff(wantAudit, e.audit(t)); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
}

func TestReplaySelection(t *testing.T) {
	e := newDLQEnv(t)
	ctx := context.Background()
	old := time.Now().Add(-2 * time.Hour)
	unknownOld := e.parkOrder(t, testOrder(e.sku, 1), order.ReasonUnknownSKU, old)
	exhausted := e.parkOrder(t, testOrder(e.sku, 2), queue.ReasonRetriesExhausted, time.Now())
	malformed := e.park(t, "", []byte("{"), order.ReasonMalformed, time.Now())
	unknownNew := e.parkOrder(t, testOrder(e.sku, 3), order.ReasonUnknownSKU, time.Now())
	all := []string{unknownOld, exhausted, malformed, unknownNew}

	tests := []struct {
		name string
		req  admin.ReplayRequest
		want []string
	}{
		{"by reason", admin.ReplayRequest{Reason: order.ReasonUnknownSKU},
			[]string{unknownOld + " would_replay", unknownNew + " would_replay"}},
		{"since", admin.ReplayRequest{Since: time.Now().Add(-time.Hour)},
			[]string{exhausted + " would_replay", malformed + " skipped_malformed", unknownNew + " would_replay"}},
		{"reason and since", admin.ReplayRequest{Reason: order.ReasonUnknownSKU, Since: time.Now().Add(-time.Hour)},
			[]string{unknownNew + " would_replay"}},
		{"all", admin.ReplayRequest{All: true},
			[]string{unknownOld + " would_replay", exhausted + " would_replay", malformed + " skipped_malformed", unknownNew + " would_replay"}},
		{"nothing matches", admin.ReplayRequest{Reason: "no_such_reason"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.DryRun, tt.req.Actor = true, "alice"
			rep, err := e.svc.Replay(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outcomes(rep)); diff != "" {
				t.Errorf("selection (-want +got):\n%s", diff)
			}
			if !rep.DryRun {
				t.Error("report does not say dry run")
			}
		})
	}
	// Dry runs changed nothing.
	if diff := cmp.Diff(all, e.ids(t)); diff != "" {
		t.Errorf("dead queue after dry runs (-want +got):\n%s", diff)
	}
	if got := e.workQueue(t); len(got) != 0 {
		t.Errorf("a dry run published %v", got)
	}
	if got := e.audit(t); len(got) != 0 {
		t.Errorf("a dry run was recorded: %v", got)
	}

	// The real thing, by reason: the others stay parked, in order.
	rep, err := e.svc.Replay(ctx, admin.ReplayRequest{Reason: order.ReasonUnknownSKU, Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts[admin.OutcomeReplayed] != 2 {
		t.Errorf("counts %v, want 2 replayed", rep.Counts)
	}
	if diff := cmp.Diff([]string{exhausted, malformed}, e.ids(t)); diff != "" {
		t.Errorf("left parked (-want +got):\n%s", diff)
	}
	want := []string{testOrder(e.sku, 1).ID, testOrder(e.sku, 3).ID}
	if diff := cmp.Diff(want, e.workQueue(t)); diff != "" {
		t.Errorf("republished (-want +got):\n%s", diff)
	}
}

// TestMistakesChangeNothing: every refused request leaves the queue, the
// work queue and the audit log as they were, with the error callers map
// to exit codes and HTTP statuses.
func TestMistakesChangeNothing(t *testing.T) {
	e := newDLQEnv(t)
	ctx := context.Background()
	good := e.parkOrder(t, testOrder(e.sku, 1), order.ReasonUnknownSKU, time.Now())
	bad := e.park(t, "", []byte("nope"), order.ReasonMalformed, time.Now())
	tests := []struct {
		name string
		req  admin.ReplayRequest
		want error
	}{
		{"no selection", admin.ReplayRequest{Actor: "a"}, order.ErrInvalid},
		{"ids and a filter", admin.ReplayRequest{IDs: []string{good}, Reason: "x", Actor: "a"}, order.ErrInvalid},
		{"all and a filter", admin.ReplayRequest{All: true, Reason: "x", Actor: "a"}, order.ErrInvalid},
		{"no actor", admin.ReplayRequest{IDs: []string{good}}, order.ErrInvalid},
		{"malformed id", admin.ReplayRequest{IDs: []string{"has space"}, Actor: "a"}, order.ErrInvalid},
		{"unknown id among good ones", admin.ReplayRequest{IDs: []string{good, "01UNKNOWN"}, Actor: "a"}, order.ErrNotFound},
		{"a letter that is not an order", admin.ReplayRequest{IDs: []string{bad}, Actor: "a"}, order.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Replay(ctx, tt.req)
			if !errors.Is(err, tt.want) || err.Error() == "" {
				t.Fatalf("replay = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := e.svc.Discard(ctx, []string{good, "01UNKNOWN"}, "a"); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("discard with an unknown id = %v, want ErrNotFound", err)
	}
	if _, err := e.svc.Discard(ctx, nil, "a"); !errors.Is(err, order.ErrInvalid) {
		t.Errorf("discard nothing = %v, want ErrInvalid", err)
	}
	if diff := cmp.Diff([]string{good, bad}, e.ids(t)); diff != "" {
		t.Errorf("dead queue (-want +got):\n%s", diff)
	}
	if got := e.workQueue(t); len(got) != 0 {
		t.Errorf("published %v", got)
	}
	if got := e.audit(t); len(got) != 0 {
		t.Errorf("recorded %v", got)
	}
}

func TestDiscard(t *testing.T) {
	e := newDLQEnv(t)
	ctx := context.Background()
	a := e.parkOrder(t, testOrder(e.sku, 1), order.ReasonUnknownSKU, time.Now())
	b := e.park(t, "", []byte("nope"), order.ReasonMalformed, time.Now())
	c := e.parkOrder(t, testOrder(e.sku, 3), order.ReasonUnknownSKU, time.Now())

	rep, err := e.svc.Discard(ctx, []string{b, a}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{a + " discarded", b + " discarded"}, outcomes(rep)); diff != "" {
		t.Errorf("discard (-want +got):\n%s", diff)
	}
	if !strings.Contains(rep.Items[0].Detail, "never processed") {
		t.Errorf("detail %q does not warn that the order was never processed", rep.Items[0].Detail)
	}
	if diff := cmp.Diff([]string{c}, e.ids(t)); diff != "" {
		t.Errorf("left parked (-want +got):\n%s", diff)
	}
	again, err := e.svc.Discard(ctx, []string{a}, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{a + " already_discarded"}, outcomes(again)); diff != "" {
		t.Errorf("repeated discard (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{a + " discarded alice", b + " discarded alice"}, e.audit(t)); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
}

// TestBrokerDown: with RabbitMQ unreachable every operation fails with
// ErrUnavailable and nothing is recorded.
func TestBrokerDown(t *testing.T) {
	e := newDLQEnv(t)
	ctx := context.Background()
	id := e.parkOrder(t, testOrder(e.sku, 1), order.ReasonUnknownSKU, time.Now())
	proxy := testenv.NewProxy(t, "127.0.0.1:5672")
	conn, err := queue.Dial(ctx, strings.Replace(testenv.AMQPURL(t), "127.0.0.1:5672", proxy.Addr(), 1), queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	svc := &ops.DeadLetters{Queue: ops.QueueDead{Conn: conn, Topology: e.topo}, DB: e.db}
	proxy.Cut()
	deadline := time.Now().Add(10 * time.Second)
	for conn.Ready() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := svc.List(ctx); !errors.Is(err, order.ErrUnavailable) {
		t.Errorf("list = %v, want ErrUnavailable", err)
	}
	if _, err := svc.Replay(ctx, admin.ReplayRequest{IDs: []string{id}, Actor: "a"}); !errors.Is(err, order.ErrUnavailable) {
		t.Errorf("replay = %v, want ErrUnavailable", err)
	}
	if _, err := svc.Discard(ctx, []string{id}, "a"); !errors.Is(err, order.ErrUnavailable) {
		t.Errorf("discard = %v, want ErrUnavailable", err)
	}
	if diff := cmp.Diff([]string{id}, e.ids(t)); diff != "" {
		t.Errorf("dead queue (-want +got):\n%s", diff)
	}
	if got := e.audit(t); len(got) != 0 {
		t.Errorf("recorded %v", got)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"90m", now.Add(-90 * time.Minute), true},
		{"2026-11-28T08:00:00Z", time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC), true},
		{"-5m", time.Time{}, false},
		{"yesterday", time.Time{}, false},
	}
	for _, tt := range tests {
		got, err := admin.ParseSince(tt.in, now)
		if (err == nil) != tt.ok || !got.Equal(tt.want) {
			t.Errorf("ParseSince(%q) = %v, %v", tt.in, got, err)
		}
		if err != nil && !errors.Is(err, order.ErrInvalid) {
			t.Errorf("ParseSince(%q) error %v does not wrap ErrInvalid", tt.in, err)
		}
	}
}

// TestReplayBatchedLetter: a batch the broker parked whole (its delivery
// limit) is replayed one message per order; once MySQL settled all of
// its orders, a replay only removes it.
func TestReplayBatchedLetter(t *testing.T) {
	e := newDLQEnv(t)
	ctx := context.Background()
	orders := []order.Order{testOrder(e.sku, 1), testOrder(e.sku, 2), testOrder(e.sku, 3)}
	first := e.parkBatch(t, "batch-1", orders)
	twin := e.parkBatch(t, "batch-2", orders) // the same orders parked again

	rep, err := e.svc.Replay(ctx, admin.ReplayRequest{IDs: []string{first}, Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{first + " replayed"}, outcomes(rep)); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	want := []string{orders[0].ID, orders[1].ID, orders[2].ID}
	if diff := cmp.Diff(want, e.workQueue(t)); diff != "" {
		t.Errorf("work queue (-want +got):\n%s", diff)
	}

	for _, o := range orders {
		e.invoice(t, o)
	}
	final, err := e.svc.Replay(ctx, admin.ReplayRequest{IDs: []string{twin}, Actor: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{twin + " already_invoiced"}, outcomes(final)); diff != "" {
		t.Errorf("replay of a settled batch (-want +got):\n%s", diff)
	}
	if got := e.workQueue(t); len(got) != 0 {
		t.Errorf("settled orders republished: %v", got)
	}
	if got := e.ids(t); len(got) != 0 {
		t.Errorf("dead letters left: %v", got)
	}
}
