package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/app"
	"surge/pkg/store"
)

// TestServicesRefuseOlderSchema: with the database's recorded schema one
// version behind this build's migrations, the gateway, the worker and the
// reconciler (scheduled and one-off) refuse to start, naming both versions
// and `opsctl migrate`.
func TestServicesRefuseOlderSchema(t *testing.T) {
	ctx := context.Background()
	c := commonConfig(t)
	c.MySQL.DSN = testenv.MySQLDSN(t) // a fresh database, one version behind
	latest := testkit.LatestMigration(t)
	testkit.StoreAtVersion(t, c.MySQL.DSN, latest-1)
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrSchemaBehind) {
			t.Errorf("%s started on schema %d of %d: %v", name, latest-1, latest, err)
			return
		}
		for _, w := range []string{fmt.Sprintf("version %d,", latest-1), fmt.Sprintf("needs version %d", latest), "opsctl migrate"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", name, err, w)
			}
		}
	}
	gcfg := app.GatewayConfig{Common: c, AdminToken: "test-token", HTTPAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0"}
	if g, err := app.NewGateway(ctx, gcfg, quietLog()); err == nil {
		_ = g.Run(canceled())
		t.Error("gateway started")
	} else {
		check("gateway", err)
	}
	if _, err := app.NewWorker(ctx, workerConfig(t, c), quietLog()); true {
		check("worker", err)
	}
	for _, oneOff := range []bool{false, true} {
		_, err := app.NewReconciler(ctx, app.ReconcilerConfig{Common: c}, quietLog(), oneOff)
		check(fmt.Sprintf("reconciler (one-off %v)", oneOff), err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
