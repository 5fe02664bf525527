package main

import (
	"bytes"
	"context"
	"testing"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
)

// TestStockLoadAudited: opsctl stock load records the load under
// $SURGE_OPERATOR, via opsctl.
func TestStockLoadAudited(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	t.Setenv("SURGE_MYSQL_DSN", dsn)
	t.Setenv("SURGE_OPERATOR", "frank")
	db := testkit.OpenStore(t, dsn)
	sku := testenv.Unique("opsctl-")
	testenv.CleanupSKU(t, testenv.Redis(t), sku)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"stock", "load", sku, "--stock", "7"}, &out, &errOut); code != 0 {
		t.Fatalf("stock load: exit %d: %s", code, errOut.String())
	}
	loads, err := db.StockLoads(context.Background(), sku, 5)
	if err != nil || len(loads) != 1 || loads[0].Actor != "frank" || loads[0].Via != admin.ViaOpsctl || loads[0].StockAfter != 7 {
		t.Fatalf("loads %+v, %v; want one by frank via opsctl", loads, err)
	}
}
