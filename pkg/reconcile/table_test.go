package reconcile_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"surge/pkg/reconcile"
)

func TestReportTable(t *testing.T) {
	after := reconcile.Counters{Loaded: true, Stock: 5, Avail: 2, Reserved: 1, Sold: 2}
	rep := reconcile.Report{
		DryRun: true,
		Summary: map[reconcile.Outcome]int{reconcile.Consistent: 1, reconcile.Repaired: 1,
			reconcile.Failed: 1},
		SKUs: []reconcile.SKUReport{
			{SKU: "a", Outcome: reconcile.Consistent, Found: &reconcile.Found{MySQLSold: 0}, After: &reconcile.Counters{Loaded: true, Stock: 3, Avail: 3}},
			{SKU: "bb", Outcome: reconcile.Repaired, Found: &reconcile.Found{MySQLSold: 2}, After: &after,
				Repairs: []reconcile.Changes{{Committed: []string{"o1", "o2"}}, {Released: []string{"o3"}}}},
			{SKU: "c", Outcome: reconcile.Failed, Error: "snapshot sku=c: unknown sku"},
		},
		ExitCode: reconcile.ExitFailed,
		Errors:   map[string]string{"run": "stopped", "list skus": "mysql down"},
	}
	var b strings.Builder
	if err := rep.Table(&b); err != nil {
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
