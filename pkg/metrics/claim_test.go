package metrics

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"surge/pkg/order"
)

type claimStub struct{ err error }

func (c claimStub) Claim(context.Context, order.Order, string, bool) (order.Claim, error) {
	return order.Claim{OrderID: "o_1", Created: c.err == nil}, c.err
}
func (c claimStub) Existing(context.Context, order.Order, string) (string, bool, error) {
	return "o_1", false, nil
}
func (c claimStub) Forget(context.Context, order.Claim) (bool, error) { return true, nil }
func (c claimStub) Unmark(context.Context, order.Claim) (bool, error) { return true, nil }

func TestCustomerLimitedCountsDecisions(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, "allowed"},
		{fmt.Errorf("order: %w", order.ErrIdempotencyMismatch), "allowed"},
		{fmt.Errorf("order was answered sold out: %w", order.ErrSoldOut), "allowed"},
		{fmt.Errorf("customer c: %w", &order.RateLimitedError{}), "limited"},
		{errors.New("claim: i/o timeout"), "error"},
	}
	for _, c := range cases {
		labels := map[string]string{"scope": "customer", "decision": c.want}
		before := sample(t, "surge_rate_limit_decisions_total", labels)
		_, err := CustomerLimited{Next: claimStub{c.err}}.Claim(context.Background(), order.Order{}, "k", false)
		if !errors.Is(err, c.err) {
			t.Errorf("decision %s: error %v, want %v passed through", c.want, err, c.err)
		}
		if got := sample(t, "surge_rate_limit_decisions_total", labels); got != before+1 {
			t.Errorf("decision %s: counter went %v -> %v, want +1", c.want, before, got)
		}
	}
}
