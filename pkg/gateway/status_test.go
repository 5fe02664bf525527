package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"surge/pkg/gateway"
	"surge/pkg/order"
)

type noLedger struct{}

func (noLedger) FinalOrder(context.Context, string) (gateway.OrderView, error) {
	return gateway.OrderView{}, order.ErrNotFound
}

type oneRecord struct{ o order.Order }

func (r oneRecord) Lookup(context.Context, string) (order.Order, error) { return r.o, nil }

type fixedState struct {
	st  string
	age time.Duration
}

func (f fixedState) OrderState(context.Context, string, string) (string, time.Duration, error) {
	return f.st, f.age, nil
}

// TestStatusPendingUntilItsRequestCannotUndo: an order in state A whose
// reservation is younger than Undoable may still be taken back by its
// request, so it reads pending; older, repeated (P) or published again by
// the reconciler, it reads accepted; undone (U), it is not found.
func TestStatusPendingUntilItsRequestCannotUndo(t *testing.T) {
	id := order.IDFor("c", "k", 0)
	o := order.Order{ID: id, SKU: "sku", Qty: 1, CustomerID: "c"}
	cases := []struct {
		st   string
		age  time.Duration
		want order.Status
	}{
		{"A", 0, order.StatusPending},
		{"A", 3999 * time.Millisecond, order.StatusPending},
		{"A", 4 * time.Second, order.StatusAccepted},
		{"A", -1, order.StatusAccepted}, // no reservation left to undo
		{"P", time.Second, order.StatusAccepted},
		{"R1", time.Second, order.StatusAccepted},
		{"U", time.Second, ""},
	}
	for _, c := range cases {
		tr := &gateway.Tracker{Ledger: noLedger{}, Idem: oneRecord{o}, Stock: fixedState{c.st, c.age}, Undoable: 4 * time.Second}
		v, err := tr.Status(context.Background(), id)
		if c.want == "" {
			if !errors.Is(err, order.ErrNotFound) {
				t.Errorf("state %s age %v: %+v %v, want not found", c.st, c.age, v, err)
			}
			continue
		}
		if err != nil || v.Status != c.want {
			t.Errorf("state %s age %v: %+v %v, want %s", c.st, c.age, v, err, c.want)
		}
	}
}
