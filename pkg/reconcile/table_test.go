package reconcile_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"surge/pkg/admin"
	"surge/pkg/reconcile"
)

func TestReportTable(t *testing.T) {
	after := admin.Counters{Loaded: true, Stock: 5, Avail: 2, Reserved: 1, Sold: 2}
	rep := admin.ReconcileReport{
		DryRun: true,
		Summary: map[admin.SKUOutcome]int{admin.SKUConsistent: 1, admin.SKURepaired: 1,
			admin.SKUFailed: 1},
		SKUs: []admin.SKUReport{
			{SKU: "a", Outcome: admin.SKUConsistent, Found: &admin.Found{MySQLSold: 0}, After: &admin.Counters{Loaded: true, Stock: 3, Avail: 3}},
			{SKU: "bb", Outcome: admin.SKURepaired, Found: &admin.Found{MySQLSold: 2}, After: &after,
				Repairs: []admin.Changes{{Committed: []string{"o1", "o2"}}, {Released: []string{"o3"}}}},
			{SKU: "c", Outcome: admin.SKUFailed, Error: "snapshot sku=c: unknown sku"},
		},
		ExitCode: reconcile.ExitFailed,
		Errors:   map[string]string{"run": "stopped", "list skus": "mysql down"},
	}
	var b strings.Builder
	if err := reconcile.Table(&b, rep); err != nil {
		t.Fatal(err)
	}
	want := `SKU  OUTCOME     REDIS STOCK/AVAIL/RESERVED/SOLD  MYSQL SOLD  DETAIL
a    consistent  3/3/0/0                          0           
bb   repaired    5/2/1/2                          2           committed 2, released 1
c    failed      -                                -           snapshot sku=c: unknown sku
error: list skus: mysql down
error: run: stopped
1 consistent, 1 to repair (dry run), 0 busy, 1 failed; exit 2
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
