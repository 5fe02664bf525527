package stock

import (
	"context"
	"fmt"

	"surge/lua"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// Sight reads, in one call that writes nothing, how many units of sku are
// left and which of ids name an order that was reserved (see
// lua/sighting.lua): the gateway answers "sold out" from it, for a batch
// of orders, without the reserve script.
func (s *Stock) Sight(ctx context.Context, sku string, ids []string) (order.Sighting, error) {
	ks := make([]string, 1, 1+len(ids))
	ks[0] = keys.Avail(sku)
	for _, id := range ids {
		ks = append(ks, keys.OrderState(sku, id))
	}
	res, err := lua.Sighting.Run(ctx, s.rdb, ks).Slice()
	if err != nil {
		return order.Sighting{}, fmt.Errorf("sighting sku=%s: %w", sku, err)
	}
	if len(res) != 2 {
		return order.Sighting{}, fmt.Errorf("sighting sku=%s: unexpected reply %v", sku, res)
	}
	avail, ok := res[0].(int64)
	flags, ok2 := res[1].(string)
	if !ok || !ok2 || (avail >= 0 && len(flags) != len(ids)) {
		return order.Sighting{}, fmt.Errorf("sighting sku=%s: unexpected reply %v", sku, res)
	}
	if avail < 0 {
		return order.Sighting{}, nil
	}
	sg := order.Sighting{Loaded: true, Avail: int(avail), Reserved: make([]bool, len(ids))}
	for i := range ids {
		sg.Reserved[i] = flags[i] == '1'
	}
	return sg, nil
}
