package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/admin"
	"surge/pkg/store"
)

// consoleClient signs in to the console at admin and returns a client
// holding the session.
func consoleClient(t *testing.T, admin, token string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := hc.PostForm(admin+"/console/login", url.Values{"token": {token}, "operator": {"dana"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.Path, "/console/") {
		t.Fatalf("sign in: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	return hc
}

func consolePage(t *testing.T, hc *http.Client, u string) string {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	return string(b)
}

var memoryCell = regexp.MustCompile(`<td class="small">\d+(\.\d+)?[KMG]</td>`)

// TestConsoleHealthAsExporter: with SURGE_CONSOLE_REDIS_USER=surge-exporter
// (as compose and Kubernetes set it) the health page shows every node's
// memory and each replica's lag; as a user refused INFO (surge-gateway) it
// says so instead.
func TestConsoleHealthAsExporter(t *testing.T) {
	serviceRedis(t, "gateway")
	serviceRedis(t, "exporter")
	c := commonConfig(t)
	for _, tt := range []struct {
		user   string
		memory bool
	}{{"surge-exporter", true}, {"surge-gateway", false}} {
		t.Run(tt.user, func(t *testing.T) {
			cfg := apptest.GatewayConfig(t, c, "test-token")
			cfg.ConsoleRedisUser, cfg.ConsoleRedisPassword = tt.user, servicePassword(strings.TrimPrefix(tt.user, "surge-"))
			_, g := startGatewayConfig(t, cfg)
			admin := apptest.AdminURL(g)
			page := consolePage(t, consoleClient(t, admin, "test-token"), admin+"/console/health")
			nodes := page[strings.Index(page, `id="nodes"`):]
			mem := len(memoryCell.FindAllString(nodes, -1))
			refused := strings.Count(nodes, "INFO refused to this user")
			if tt.memory && (mem < 6 || refused != 0 || !regexp.MustCompile(`<td class="num">\d+</td><td class="num">\d+</td>`).MatchString(nodes)) {
				t.Errorf("as %s: %d nodes with memory, %d refused, lag shown: want 6+, 0, yes", tt.user, mem, refused)
			}
			if !tt.memory && (mem != 0 || refused < 6) {
				t.Errorf("as %s: %d nodes with memory, %d refused; want 0 and every node saying INFO was refused", tt.user, mem, refused)
			}
		})
	}
}

// TestStockLoadAuditedThroughAdminAPI: a load through the admin API is
// recorded under X-Surge-Operator, or admin-api without it; an invalid
// operator name is refused and loads nothing.
func TestStockLoadAuditedThroughAdminAPI(t *testing.T) {
	c := commonConfig(t)
	_, g := startGatewayConfig(t, apptest.GatewayConfig(t, c, "test-token"))
	adminURL := apptest.AdminURL(g)
	sku := testenv.Unique("audit-")
	testenv.CleanupSKU(t, testenv.Redis(t), sku)
	put := func(stock, operator string) int {
		req, _ := http.NewRequest(http.MethodPut, adminURL+"/v1/admin/stock/"+sku, strings.NewReader(`{"stock":`+stock+`}`))
		req.Header.Set("Authorization", "Bearer test-token")
		if operator != "" {
			req.Header.Set("X-Surge-Operator", operator)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put("10", ""); code != http.StatusOK {
		t.Fatalf("load: %d", code)
	}
	if code := put("12", "erin"); code != http.StatusOK {
		t.Fatalf("load as erin: %d", code)
	}
	if code := put("99", strings.Repeat("x", 65)); code != http.StatusBadRequest {
		t.Errorf("load with an invalid operator: %d, want 400", code)
	}
	db, err := store.Open(context.Background(), c.MySQL.DSN, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loads, err := db.StockLoads(context.Background(), sku, 10)
	if err != nil || len(loads) != 2 {
		t.Fatalf("loads %+v, %v; want 2", loads, err)
	}
	if l := loads[0]; l.Actor != "erin" || l.Via != admin.ViaAdminAPI || l.StockAfter != 12 || l.StockBefore.Int64 != 10 {
		t.Errorf("newest load %+v, want erin via admin-api 10 -> 12", l)
	}
	if l := loads[1]; l.Actor != "admin-api" || l.Via != admin.ViaAdminAPI || !l.Created() {
		t.Errorf("first load %+v, want admin-api creating the product", l)
	}
}
