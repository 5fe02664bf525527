package gateway

import (
	"context"
	"errors"
	"testing"

	"surge/pkg/order"
)

// promoted answers Recent for every SKU alike.
type promoted bool

func (p promoted) Recent(context.Context, string) bool { return bool(p) }

// TestNoSoldOutFromAMasterThatTookOverRecently: with the SKU's master
// promoted recently, an order Redis refuses as sold out is answered an
// unknown outcome naming its order (its key may name an order the dead
// master accepted), and the sold-out read answers nothing: the order goes
// the full way. Once the master is established, the same order is 409.
func TestNoSoldOutFromAMasterThatTookOverRecently(t *testing.T) {
	s, st, _, _ := soldOutService(t)
	ctx := context.Background()
	s.Failovers, s.SoldOut.Failovers = promoted(true), promoted(true)
	sights := st.sights
	if err := s.RefuseSoldOut(ctx, buy("bob", 1), "b"); err != nil {
		t.Fatalf("sold-out read on a recent master: %v, want the full way", err)
	}
	if st.sights != sights {
		t.Fatalf("the sold-out read ran %d times on a recent master", st.sights-sights)
	}
	_, err := s.Accept(ctx, buy("bob", 1), "b")
	wantUnknown(t, err, order.IDFor("bob", "b", 0))
	if st.reserved() != 1 {
		t.Fatalf("reserved %d units, want alice's 1 only", st.reserved())
	}

	s.Failovers, s.SoldOut.Failovers = promoted(false), promoted(false)
	if _, err := s.Accept(ctx, buy("bob", 1), "b"); !errors.Is(err, order.ErrSoldOut) {
		t.Fatalf("retry once the master is established: %v, want sold out", err)
	}
}
