package stock

import (
	"context"
	"fmt"
	"time"

	"surge/lua"
	"surge/pkg/keys"
)

// OrderState returns orderID's state on sku's slot (see keys.OrderState;
// "" when none) and how long ago its open reservation was made, by the
// clock of the master that stamped it (negative when it holds none). One
// script reads both, so no gateway's clock enters the age.
func (s *Stock) OrderState(ctx context.Context, sku, orderID string) (string, time.Duration, error) {
	ks := []string{keys.Resv(sku), keys.OrderState(sku, orderID)}
	raw, err := lua.OrderState.Run(ctx, s.rdb, ks, orderID).Slice()
	if err != nil {
		return "", 0, fmt.Errorf("order state sku=%s order=%s: %w", sku, orderID, err)
	}
	if len(raw) != 2 {
		return "", 0, fmt.Errorf("order state sku=%s order=%s: unexpected reply %v", sku, orderID, raw)
	}
	st, _ := raw[0].(string)
	ms, ok := raw[1].(int64)
	if !ok {
		return "", 0, fmt.Errorf("order state sku=%s order=%s: unexpected age %v", sku, orderID, raw[1])
	}
	if ms < 0 {
		return st, -1, nil
	}
	return st, time.Duration(ms) * time.Millisecond, nil
}
