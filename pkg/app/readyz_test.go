package app_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/internal/testkit"
)

// TestReadyWithoutMySQL: no order touches MySQL on its way in, so a MySQL
// outage must not take the gateways out of their load balancer. With
// MySQL cut off (a proxy, never the shared server), the public /readyz
// stays 200 naming only Redis and RabbitMQ, with no internal detail; the
// admin listener's /v1/admin/readyz shows MySQL down with the driver's
// error; an order is accepted, and a worker invoices it once MySQL is
// back.
func TestReadyWithoutMySQL(t *testing.T) {
	c := commonConfig(t)
	direct := c.MySQL.DSN
	dsn, err := mysql.ParseDSN(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, dsn.Addr)
	dsn.Addr = proxy.Addr()
	c.MySQL.DSN = dsn.FormatDSN()
	url, g := startGateway(t, c)
	startWorker(t, c)
	p := &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: openDB(t, direct), Stock: g.Stock, Cfg: c}
	sku := testenv.Unique("ready-")
	p.loadStock(t, sku, 5)

	proxy.Cut()
	status, body := getReady(t, p.URL+"/readyz", "")
	want := map[string]string{"redis": "ok", "rabbitmq": "ok"}
	if status != http.StatusOK || !maps.Equal(body, want) {
		t.Fatalf("public /readyz with MySQL down: %d %v, want 200 %v", status, body, want)
	}
	testkit.WaitFor(t, "the admin readyz to show MySQL down", 10*time.Second, func() (bool, error) {
		status, body := getReady(t, p.Admin+"/v1/admin/readyz", p.Token)
		return status == http.StatusServiceUnavailable && body["mysql"] != "ok" && body["mysql"] != "" &&
			body["redis"] == "ok" && body["rabbitmq"] == "ok", nil
	})
	if status, _ := getReady(t, p.Admin+"/v1/admin/readyz", ""); status != http.StatusUnauthorized {
		t.Fatalf("admin readyz without the token: %d, want 401", status)
	}

	a := post(t, newClient(t), p.URL, "ready-1", orderBody(sku, 2, testenv.Unique("c-")))
	if a.Status != http.StatusAccepted {
		t.Fatalf("order with MySQL down: %d %+v, want 202", a.Status, a.Error)
	}
	proxy.Restore()
	testkit.WaitFor(t, "the order invoiced once MySQL is back", 120*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n == 1, err
	})
	if status, body := getReady(t, p.Admin+"/v1/admin/readyz", p.Token); status != http.StatusOK || body["mysql"] != "ok" {
		t.Fatalf("admin readyz with MySQL back: %d %v", status, body)
	}
}

// getReady reads a readiness answer (with the admin token when given).
func getReady(t *testing.T, url, token string) (int, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("get %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	body := map[string]string{}
	if resp.StatusCode != http.StatusUnauthorized && json.Unmarshal(raw, &body) != nil {
		t.Fatalf("%s: %d %q is not a JSON object of strings", url, resp.StatusCode, raw)
	}
	return resp.StatusCode, body
}
