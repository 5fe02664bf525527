package metrics

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"surge/pkg/gateway"
	"surge/pkg/order"
)

// TestCustomerLimitedCountsDecisions: each claim counts as a decision of
// the customer's limit, by its error, when the claim spends the budget;
// without the limit, claims count nothing.
func TestCustomerLimitedCountsDecisions(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, "allowed"},
		{fmt.Errorf("order: %w", order.ErrIdempotencyMismatch), "allowed"},
		{fmt.Errorf("order was answered sold out: %w", order.ErrSoldOut), "allowed"},
		{&order.UnknownOutcomeError{OrderID: "o_1"}, "allowed"},
		{fmt.Errorf("customer c: %w", &order.RateLimitedError{}), "limited"},
		{errors.New("claim: i/o timeout"), "error"},
	}
	ctx := context.Background()
	for _, c := range cases {
		labels := map[string]string{"scope": "customer", "decision": c.want}
		before := max(sample(t, "surge_rate_limit_decisions_total", labels), 0)
		GatewayObserver{CustomerLimited: true}.End(ctx, gateway.StepClaim, order.Order{}, gateway.Result{Err: c.err})
		if got := sample(t, "surge_rate_limit_decisions_total", labels); got != before+1 {
			t.Errorf("decision %s: counter went %v -> %v, want +1", c.want, before, got)
		}
		GatewayObserver{}.End(ctx, gateway.StepClaim, order.Order{}, gateway.Result{Err: c.err})
		if got := sample(t, "surge_rate_limit_decisions_total", labels); got != before+1 {
			t.Errorf("decision %s without the customer limit: counter went %v -> %v, want unchanged", c.want, before+1, got)
		}
	}
}

// TestLimitObserverCountsDecisions: each decision of the per-IP limit
// counts under its scope: allowed, limited, or error when the limiter
// failed (whatever it answered).
func TestLimitObserverCountsDecisions(t *testing.T) {
	cases := []struct {
		allowed bool
		err     error
		want    string
	}{
		{true, nil, "allowed"},
		{false, nil, "limited"},
		{true, errors.New("redis down"), "error"},
	}
	for _, c := range cases {
		labels := map[string]string{"scope": "ip", "decision": c.want}
		before := max(sample(t, "surge_rate_limit_decisions_total", labels), 0)
		LimitObserver{}.LimitDecided("ip", c.allowed, c.err)
		if got := sample(t, "surge_rate_limit_decisions_total", labels); got != before+1 {
			t.Errorf("decision %s: counter went %v -> %v, want +1", c.want, before, got)
		}
	}
}
