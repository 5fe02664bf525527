package loadgen

import (
	"strings"
	"testing"

	"surge/pkg/admin"
)

func answered(done int64, status map[string]int64) Counts { return Counts{Done: done, Status: status} }

func TestVerify(t *testing.T) {
	sold := Books{Stock: 100, Sold: 100, Invoices: 100, InvoicedUnits: 100}
	settled := &admin.StockReport{Consistent: true, Redis: admin.RedisStock{Loaded: true, Stock: 100, Sold: 100}}
	for _, c := range []struct {
		name    string
		in      CheckInput
		problem string // "" means the check passes
	}{
		{"flash sale sold out exactly",
			CheckInput{Stock: 100, Qty: 1, Counts: answered(1000, map[string]int64{"202": 100, "409": 900}), Books: sold, View: settled}, ""},
		{"demand below stock",
			CheckInput{Stock: 100, Qty: 1, Counts: answered(40, map[string]int64{"202": 40}),
				Books: Books{Stock: 100, Sold: 40, Invoices: 40, InvoicedUnits: 40}}, ""},
		{"qty 2 halves the orders stock can serve",
			CheckInput{Stock: 100, Qty: 2, Counts: answered(80, map[string]int64{"202": 50, "409": 30}),
				Books: Books{Stock: 100, Sold: 100, Invoices: 50, InvoicedUnits: 100}}, ""},
		{"unsold units",
			CheckInput{Stock: 100, Qty: 1, Counts: answered(1000, map[string]int64{"202": 99, "409": 901}),
				Books: Books{Stock: 100, Sold: 99, Invoices: 99, InvoicedUnits: 99}}, "accepted 99 orders, want"},
		{"answers other than 202 and 409",
			CheckInput{Stock: 100, Qty: 1, Counts: answered(1000, map[string]int64{"202": 100, "409": 899, "503": 1}), Books: sold},
			"neither 202 nor 409"},
		{"missing invoices",
			CheckInput{Stock: 100, Qty: 1, Counts: answered(1000, map[string]int64{"202": 100, "409": 900}),
				Books: Books{Stock: 100, Sold: 98, Invoices: 98, InvoicedUnits: 98}}, "98 invoices for 100 accepted"},
		{"oversold",
			CheckInput{Stock: 100, Qty: 1, Counts: answered(1000, map[string]int64{"202": 100, "409": 900}),
				Books: Books{Stock: 100, Sold: 100, Invoices: 100, InvoicedUnits: 101}}, "oversold"},
		{"rejected by MySQL",
			CheckInput{Stock: 100, Qty: 1, Counts: answered(1000, map[string]int64{"202": 100, "409": 900}),
				Books: Books{Stock: 100, Sold: 100, Invoices: 100, InvoicedUnits: 100, Rejected: 1}}, "rejected 1"},
		{"reservations left in Redis",
			CheckInput{Stock: 100, Qty: 1, Counts: answered(1000, map[string]int64{"202": 100, "409": 900}), Books: sold,
				View: &admin.StockReport{Consistent: true, Redis: admin.RedisStock{Stock: 100, Sold: 99, Reserved: 1}}}, "Redis view not settled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Verify(c.in)
			if c.problem == "" {
				if !got.OK {
					t.Fatalf("check failed: %q", got.Problems)
				}
				return
			}
			if got.OK || !strings.Contains(strings.Join(got.Problems, "; "), c.problem) {
				t.Fatalf("check = ok %v problems %q, want a problem containing %q", got.OK, got.Problems, c.problem)
			}
		})
	}
}
