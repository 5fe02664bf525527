package loadgen

import (
	"fmt"
	"net/http"

	"surge/pkg/admin"
)

// CheckInput is what the correctness check compares: the load's answers,
// MySQL's rows, and optionally the stock view of the admin API.
type CheckInput struct {
	// Stock is the number of units loaded before the run; Qty the units
	// per order.
	Stock, Qty int64
	Counts     Counts
	Books      Books
	// View is the admin API's stock report; nil skips the Redis checks.
	View *admin.StockReport
}

// Check is the verdict of the correctness check.
type Check struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems,omitempty"`
	// Expected is min(stock, demand) in orders; Accepted the 202 answers.
	Expected int64 `json:"expected"`
	Accepted int64 `json:"accepted"`
	SoldOut  int64 `json:"sold_out"`
	Books    Books `json:"mysql"`
	// RedisConsistent reports avail + reserved + sold == stock, nothing
	// left reserved, and Redis agreeing with MySQL; nil when not checked.
	RedisConsistent *bool `json:"redis_consistent,omitempty"`
}

// Verify checks that the run sold exactly min(stock, demand), that every
// accepted order has its invoice and no other does, and that nothing was
// oversold. Every request must have been answered 202 or 409: any other
// answer makes the demand ambiguous, and is reported.
func Verify(in CheckInput) Check {
	qty := max(in.Qty, 1)
	c := Check{
		Accepted: in.Counts.Of(http.StatusAccepted),
		SoldOut:  in.Counts.Of(http.StatusConflict),
		Books:    in.Books,
	}
	c.Expected = min(in.Stock/qty, in.Counts.Done)
	problem := func(format string, args ...any) { c.Problems = append(c.Problems, fmt.Sprintf(format, args...)) }
	if other := in.Counts.Done - c.Accepted - c.SoldOut; other > 0 {
		problem("%d requests answered neither 202 nor 409 (status counts %v)", other, in.Counts.Status)
	}
	if c.Accepted != c.Expected {
		problem("accepted %d orders, want min(stock %d, demand %d) = %d", c.Accepted, in.Stock/qty, in.Counts.Done, c.Expected)
	}
	b := in.Books
	if b.Invoices != c.Accepted {
		problem("MySQL holds %d invoices for %d accepted orders", b.Invoices, c.Accepted)
	}
	if b.InvoicedUnits > b.Stock || b.Sold > b.Stock {
		problem("oversold: %d units invoiced, sold=%d, stock=%d", b.InvoicedUnits, b.Sold, b.Stock)
	}
	if b.Sold != b.InvoicedUnits {
		problem("products.sold=%d but invoices hold %d units", b.Sold, b.InvoicedUnits)
	}
	if b.Rejected != 0 {
		problem("MySQL rejected %d orders the gateway had accepted", b.Rejected)
	}
	if in.View != nil {
		v := in.View.Redis
		ok := in.View.Consistent && v.Reserved == 0
		c.RedisConsistent = &ok
		if !ok {
			problem("Redis view not settled: stock=%d avail=%d reserved=%d sold=%d consistent=%v",
				v.Stock, v.Avail, v.Reserved, v.Sold, in.View.Consistent)
		}
	}
	c.OK = len(c.Problems) == 0
	return c
}
