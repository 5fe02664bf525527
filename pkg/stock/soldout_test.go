package stock_test

import (
	"context"
	"testing"

	"surge/pkg/keys"
)

// restock sets the scripts' SKU's stock to total (nothing sold).
func (s scripts) restock(total int) {
	s.t.Helper()
	if _, err := s.st.SetStock(context.Background(), s.sku, total, 0); err != nil {
		s.t.Fatal(err)
	}
}

// TestSoldOutOrderIsJudgedAnew: an order refused sold out binds nothing.
// A copy of the refused call (the same nonce) is refused again, but a
// retry (a new nonce) is judged anew: sold out while no unit is left, and
// it reserves once units come back.
func TestSoldOutOrderIsJudgedAnew(t *testing.T) {
	s := newScripts(t, 0)
	if code := s.reserve("n1", true); code != 0 {
		t.Fatalf("reserve with no unit: code %d, want 0 (sold out)", code)
	}
	if code := s.reserve("n1", true); code != 3 {
		t.Fatalf("a copy of the refused call: code %d, want 3 (its first answer)", code)
	}
	if code := s.reserve("n2", false); code != 0 {
		t.Fatalf("a retry while still sold out: code %d, want 0", code)
	}
	s.restock(1)
	if code := s.reserve("n3", false); code != 1 {
		t.Fatalf("a retry after the restock: code %d, want 1 (reserved)", code)
	}
	if held := s.held(); held == "" || s.state() != "A" {
		t.Fatalf("reservation %q state %q, want the retry's, A", held, s.state())
	}
}

// TestLateCopyOfARefusedCallAfterARetryReserved: the calls refused sold out
// before a retry reserved cannot take the order later, whatever happens
// to the retry's reservation: a copy of one arriving (TCP retransmits it)
// after the retry reserved, and again after the retry undid its
// reservation (its publish failed: answered not taken), reserves nothing.
func TestLateCopyOfARefusedCallAfterARetryReserved(t *testing.T) {
	s := newScripts(t, 0)
	for _, n := range []string{"n1", "n2"} {
		if code := s.reserve(n, n == "n1"); code != 0 {
			t.Fatalf("reserve %s with no unit: code %d, want 0", n, code)
		}
	}
	s.restock(1)
	if code := s.reserve("n3", false); code != 1 {
		t.Fatalf("retry after the restock: code %d, want 1", code)
	}
	held := s.held()
	for _, n := range []string{"n1", "n2"} {
		if code := s.reserve(n, n == "n1"); code != 5 || s.held() != held {
			t.Fatalf("late copy of %s after the retry reserved: code %d, held %q, want 5 and %q", n, code, s.held(), held)
		}
	}
	if n := s.undo("n3"); n != 1 {
		t.Fatalf("the retry's undo: %d, want 1 unit back", n)
	}
	for _, n := range []string{"n1", "n2"} {
		if code := s.reserve(n, true); code != 5 || s.held() != "" {
			t.Fatalf("late copy of %s after the undo: code %d, held %q, want 5 and nothing", n, code, s.held())
		}
	}
}

// TestSoldOutStateOfAnOlderScriptStays: a bare S, written before refused
// calls were remembered, keeps its old meaning: every call repeats it.
func TestSoldOutStateOfAnOlderScriptStays(t *testing.T) {
	s := newScripts(t, 1)
	if err := s.rdb.Set(context.Background(), keys.OrderState(s.sku, s.id), "S", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if code := s.reserve("n1", false); code != 3 || s.held() != "" {
		t.Fatalf("retry of an old sold-out state: code %d, held %q, want 3 and nothing", code, s.held())
	}
}

// TestSightReportsReservedOrders: one read gives the units left and, per
// id, whether an order of it was reserved: on its way (A, P, R1),
// committed (C) or rejected (X), not one refused (S, L), undone (U) or
// unknown.
func TestSightReportsReservedOrders(t *testing.T) {
	ctx := context.Background()
	st, sku := setup(t, 7)
	rdb := newScripts(t, 0).rdb
	states := map[string]string{"a": "A", "p": "P", "r": "R1", "c": "C", "x": "X", "s": "S n1", "l": "L", "u": "U"}
	want := map[string]bool{"a": true, "p": true, "r": true, "c": true, "x": true, "new": false}
	ids := []string{"new"}
	for id, state := range states {
		if err := rdb.Set(ctx, keys.OrderState(sku, id), state, 0).Err(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	sg, err := st.Sight(ctx, sku, ids)
	if err != nil || !sg.Loaded || sg.Avail != 7 || len(sg.Reserved) != len(ids) {
		t.Fatalf("sight: %+v %v, want 7 units and %d flags", sg, err, len(ids))
	}
	for i, id := range ids {
		if sg.Reserved[i] != want[id] {
			t.Errorf("id %s (state %q): reserved %v, want %v", id, states[id], sg.Reserved[i], want[id])
		}
	}
	if sg, err := st.Sight(ctx, sku+"-none", []string{"a"}); err != nil || sg.Loaded {
		t.Fatalf("sight of a SKU not loaded: %+v %v, want not loaded", sg, err)
	}
}

// TestUndoBeforeTheLoadRefusesALateCopy: a reserve call answered "not
// loaded" and undone (the gateway's answer, issue 29 item 6) leaves its
// mark even though the SKU has no stock keys: a copy of that call arriving
// after the stock was loaded reserves nothing.
func TestUndoBeforeTheLoadRefusesALateCopy(t *testing.T) {
	s := newScripts(t, -1)
	if code := s.reserve("n1", true); code != -1 {
		t.Fatalf("reserve before the load: code %d, want -1 (not loaded)", code)
	}
	if n := s.undo("n1"); n != 0 {
		t.Fatalf("undo before the load: %d, want 0", n)
	}
	s.restock(5)
	if code := s.reserve("n1", true); code != 5 || s.held() != "" {
		t.Fatalf("late copy after the load: code %d, held %q, want 5 and nothing", code, s.held())
	}
}
