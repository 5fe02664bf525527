package stock

import (
	"context"
	"fmt"
	"strconv"

	"surge/lua"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// BelowHeldError refuses a stock load below the units Redis holds as sold
// or reserved. Every open reservation is an order its request may have
// answered accepted: a stock below them would have MySQL refuse orders
// already promised. It matches order.ErrConflict with errors.Is.
type BelowHeldError struct {
	SKU      string
	Stock    int
	Sold     int
	Reserved int
}

func (e *BelowHeldError) Error() string {
	return fmt.Sprintf("stock %d for sku %s is below sold %d + reserved %d in Redis right now: set it to at least %d",
		e.Stock, e.SKU, e.Sold, e.Reserved, e.Min())
}

// Min is the lowest stock the load would have accepted.
func (e *BelowHeldError) Min() int { return e.Sold + e.Reserved }

// Is reports whether target is order.ErrConflict.
func (e *BelowHeldError) Is(target error) bool { return target == order.ErrConflict }

// SetStock sets sku's total stock in Redis, keeping sold units and open
// reservations; mysqlSold seeds the sold counter of a SKU Redis has never
// seen. A total below sold + reserved is refused with a *BelowHeldError
// and changes nothing: the check and the set are one script, so no
// reservation made meanwhile can slip under the new stock. It returns the
// resulting view.
func (s *Stock) SetStock(ctx context.Context, sku string, total, mysqlSold int) (View, error) {
	return s.SetStockLimit(ctx, sku, total, mysqlSold, nil)
}

// SetStockLimit is SetStock that also sets the SKU's purchase limit per
// customer in the same script: nil keeps the current one, 0 clears it. A
// new limit applies to the reservations made from then on.
func (s *Stock) SetStockLimit(ctx context.Context, sku string, total, mysqlSold int, maxPerCustomer *int) (View, error) {
	ks := []string{keys.Avail(sku), keys.Resv(sku), keys.Sold(sku), keys.Stock(sku), keys.MaxPerCustomer(sku)}
	limit := ""
	if maxPerCustomer != nil {
		limit = strconv.Itoa(*maxPerCustomer)
	}
	res, err := lua.Load.Run(ctx, s.rdb, ks, total, mysqlSold, limit).Int64Slice()
	if err != nil {
		return View{}, fmt.Errorf("load stock sku=%s: %w", sku, err)
	}
	if len(res) != 4 {
		return View{}, fmt.Errorf("load stock sku=%s: unexpected reply %v", sku, res)
	}
	if res[0] == 0 {
		return View{}, &BelowHeldError{SKU: sku, Stock: total, Sold: int(res[2]), Reserved: int(res[3])}
	}
	return s.View(ctx, sku)
}
