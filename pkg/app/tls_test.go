package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"surge/internal/testkit"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/apitest"
	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/app"
	"surge/pkg/cluster"
	"surge/pkg/config"
	"surge/pkg/stock"
)

// tlsCluster starts a private Redis Cluster that speaks TLS only (ports
// from 7400, cluster bus and replication over TLS too, client
// certificates required), stopped at cleanup.
func tlsCluster(t *testing.T) *testenv.PrivateCluster {
	t.Helper()
	c, err := testenv.StartPrivateCluster(7400, filepath.Join(t.TempDir(), "redis"), "surge-tls", testenv.WithTLS())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// tlsRedis loads the Redis settings for c from SURGE_ variables, as a
// deployment would set them: the TLS variables in vars, the others unset.
// The environment is restored before it returns: the rest of the test
// (apptest) reads it for the shared engines. No test of this package runs
// in parallel.
func tlsRedis(t *testing.T, c *testenv.PrivateCluster, vars map[string]string) (config.Redis, error) {
	t.Helper()
	set := map[string]string{"SURGE_REDIS_ADDRS": strings.Join(c.Addrs(), ","), "SURGE_REDIS_PASSWORD": c.Password}
	for _, k := range []string{"SURGE_REDIS_TLS", "SURGE_REDIS_TLS_CA_FILE", "SURGE_REDIS_TLS_CERT_FILE",
		"SURGE_REDIS_TLS_KEY_FILE", "SURGE_REDIS_TLS_SERVER_NAME"} {
		set[k] = vars[k]
	}
	for k, v := range set {
		old, had := os.LookupEnv(k)
		if v == "" {
			_ = os.Unsetenv(k)
		} else {
			_ = os.Setenv(k, v)
		}
		defer func() {
			if had {
				_ = os.Setenv(k, old)
			} else {
				_ = os.Unsetenv(k)
			}
		}()
	}
	var cfg struct{ config.Common }
	err := config.Load(&cfg)
	return cfg.Redis, err
}

// TestOrdersOverTLS runs the order path end to end against a Redis Cluster
// that accepts nothing but TLS: stock loaded through the admin API, orders
// posted, every one invoiced, and the SKU's keys found on the TLS cluster
// only. Then a client without the CA is refused, saying why.
func TestOrdersOverTLS(t *testing.T) {
	priv := tlsCluster(t)
	files := priv.TLS
	r, err := tlsRedis(t, priv, map[string]string{"SURGE_REDIS_TLS": "true",
		"SURGE_REDIS_TLS_CA_FILE": files.CA, "SURGE_REDIS_TLS_CERT_FILE": files.ClientCert,
		"SURGE_REDIS_TLS_KEY_FILE": files.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	if r.TLSConfig() == nil {
		t.Fatal("SURGE_REDIS_TLS=true left the client on plain TCP")
	}
	// Every node listens on TLS only and speaks TLS to its peers.
	rc := cluster.New(r.Options())
	err = rc.ForEachShard(context.Background(), func(ctx context.Context, n *redis.Client) error {
		for k, want := range map[string]string{"port": "0", "tls-cluster": "yes", "tls-replication": "yes", "tls-auth-clients": "yes"} {
			if got, err := n.ConfigGet(ctx, k).Result(); err != nil || got[k] != want {
				return fmt.Errorf("node %s: %s = %q (%v), want %q", n.Options().Addr, k, got[k], err, want)
			}
		}
		return nil
	})
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("orders invoiced", func(t *testing.T) {
		c := apptest.Common(t)
		c.Redis = r
		url, g := apptest.Gateway(t, apptest.GatewayConfig(t, c, "test-token"), quietLog())
		admin := apptest.AdminURL(g)
		apptest.Worker(t, apptest.WorkerConfig(t, c), quietLog())
		sku := testenv.Unique("tls-")
		apptest.PutStock(t, apitest.Client(t), admin, "test-token", sku, 5, "TLS item", 500)

		hc := newClient(t)
		var ids []string
		for i := range 6 {
			a := post(t, hc, url, "k-"+itoa(i), orderBody(sku, 1, "tls-buyer-"+itoa(i)))
			switch {
			case i < 5 && a.Status == http.StatusAccepted:
				ids = append(ids, a.OrderID)
			case i == 5 && a.Status == http.StatusConflict && a.Error.Code == "sold_out":
			default:
				t.Fatalf("order %d: %d %+v", i, a.Status, a)
			}
		}
		for _, id := range ids {
			testkit.WaitFor(t, "order "+id+" invoiced", 15*time.Second, func() (bool, error) {
				resp, err := hc.Get(url + "/v1/orders/" + id)
				if err != nil {
					return false, err
				}
				defer resp.Body.Close()
				var a answer
				err = jsonDecode(resp.Body, &a)
				return a.State == "invoiced", err
			})
		}
		// The worker commits Redis right after MySQL: wait for it too.
		var v stock.View
		testkit.WaitFor(t, "5 sold, 0 available on the TLS cluster", 15*time.Second, func() (bool, error) {
			var err error
			v, err = g.Stock.View(context.Background(), sku)
			return err == nil && v.Sold == 5 && v.Avail == 0 && v.Reserved == 0, err
		})
		shared := testenv.Redis(t)
		if n, err := shared.Exists(context.Background(), "{sku:"+sku+"}:avail").Result(); err != nil || n != 0 {
			t.Fatalf("the SKU's keys are on the shared plain-TCP cluster (%d, %v): the orders did not go over TLS", n, err)
		}
	})

	t.Run("refused without the CA", func(t *testing.T) {
		noCA, err := tlsRedis(t, priv, map[string]string{"SURGE_REDIS_TLS": "true",
			"SURGE_REDIS_TLS_CERT_FILE": files.ClientCert, "SURGE_REDIS_TLS_KEY_FILE": files.ClientKey})
		if err != nil {
			t.Fatal(err)
		}
		rc := cluster.New(noCA.Options())
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = rc.Ready(ctx)
		if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("ready without the CA: %v, want the certificate refused as signed by an unknown authority", err)
		}
		var gcfg app.GatewayConfig
		gcfg.Common.Redis = noCA
		_, err = app.NewGateway(ctx, gcfg, quietLog())
		if err == nil || !strings.Contains(err.Error(), "unknown authority") || !strings.Contains(err.Error(), "SURGE_REDIS_TLS_CA_FILE") {
			t.Fatalf("gateway without the CA: %v, want an error naming the unknown authority and SURGE_REDIS_TLS_CA_FILE", err)
		}
		t.Logf("gateway without the CA: %v", err)
	})

	t.Run("refused in plain TCP", func(t *testing.T) {
		plain, err := tlsRedis(t, priv, nil)
		if err != nil {
			t.Fatal(err)
		}
		rc := cluster.New(plain.Options())
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rc.Ready(ctx); err == nil {
			t.Fatal("a plain-TCP client reached the TLS-only cluster")
		}
	})
}
