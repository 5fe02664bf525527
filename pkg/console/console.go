// Package console is surge's operations console: server-rendered pages
// (html/template, assets embedded) on the gateway's admin listener, under
// /console/, for the people who run a sale.
//
//	/console/                  the sale board: every SKU, Redis beside MySQL, live
//	/console/skus/{sku}        one SKU: consistency, recent orders, reconcile
//	/console/dead-letters      parked orders: filter, inspect, replay, discard, restore
//	/console/reconcile         the reconciler's history (reconcile_repairs)
//	/console/orders/{id}       one order and the path it took; lookup by customer and key
//	/console/health            engines, queue depths, the Redis Cluster's nodes
//
// Operators sign in with the admin token and their name; the session is a
// signed cookie (session.go) and every change is a POST carrying the
// session's CSRF token. Every change goes through the same packages as
// opsctl and the admin API (pkg/ops, pkg/reconcile), so the audit rows it
// leaves (dlq_replays, reconcile_repairs) name the signed-in operator.
package console

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"surge/pkg/admin"
	"surge/pkg/gateway"
	"surge/pkg/ops"
	"surge/pkg/order"
	"surge/pkg/stock"
	"surge/pkg/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the console reads from MySQL. *store.Store implements it.
type Store interface {
	RecentProducts(ctx context.Context, search string, limit int) ([]store.LoadedProduct, error)
	RecentOrders(ctx context.Context, sku string, limit int) ([]store.OrderRow, error)
	OrderRows(ctx context.Context, ids []string) (map[string]store.OrderRow, error)
	Replays(ctx context.Context, q store.AuditQuery) ([]store.ReplayEntry, error)
	Repairs(ctx context.Context, q store.AuditQuery) ([]store.RepairEntry, error)
	StockLoads(ctx context.Context, sku string, limit int) ([]store.StockLoad, error)
}

var _ Store = (*store.Store)(nil)

// StockViewer shows a SKU in Redis and MySQL side by side. *ops.Stock
// implements it.
type StockViewer interface {
	Show(ctx context.Context, sku string) (admin.StockReport, error)
}

// StockLoader loads stock as the admin API does (MySQL and Redis in one
// step, the gateway's cached view dropped). The gateway's stock admin
// implements it.
type StockLoader interface {
	Load(ctx context.Context, sku string, req admin.LoadRequest) (admin.StockReport, error)
}

// StatusReader answers an order's status as the public API does.
// *gateway.Tracker implements it.
type StatusReader interface {
	Status(ctx context.Context, id string) (gateway.OrderView, error)
}

// OrderStates reads an order's state on its SKU's slot (keys.OrderState).
// *stock.Stock implements it.
type OrderStates interface {
	State(ctx context.Context, sku, orderID string) (string, error)
}

// DeadLetters works the dead-letter queue. *ops.DeadLetters implements it.
type DeadLetters interface {
	List(ctx context.Context) ([]admin.Letter, error)
	Show(ctx context.Context, id string) (admin.LetterDetail, error)
	Replay(ctx context.Context, req admin.ReplayRequest) (admin.LetterReport, error)
	Discard(ctx context.Context, ids []string, actor string) (admin.LetterReport, error)
	Discarded(ctx context.Context) ([]admin.LetterDetail, error)
	Restore(ctx context.Context, ids []string, actor string) (admin.LetterReport, error)
}

var _ DeadLetters = (*ops.DeadLetters)(nil)

// Reconciler runs a reconcile on demand. *ops.Reconcile implements it.
type Reconciler interface {
	Run(ctx context.Context, req admin.ReconcileRequest) (admin.ReconcileReport, error)
}

var _ Reconciler = (*ops.Reconcile)(nil)

// Console holds the pages' dependencies. Set the fields, then mount
// Handler at /console/ on the admin listener.
type Console struct {
	// Token is the admin token: the sign-in password, and the key the
	// session cookies are signed with (changing it signs everyone out).
	Token string
	Store Store
	Stock StockViewer
	// Loads loads stock from a SKU's page, audited under the operator.
	// Nil: the page has no load form.
	Loads     StockLoader
	Status    StatusReader
	States    OrderStates
	Letters   DeadLetters
	Reconcile Reconciler
	Health    *Health
	// Counters reads many SKUs' stock counters in one round trip
	// (stock.ReadCounters on the cluster): the board's Redis read.
	Counters func(ctx context.Context, skus []string) ([]stock.Counters, error)
	// SnapshotEvery is how often the board and the health page are read
	// from the engines, whatever the number of viewers:
	// SURGE_CONSOLE_SNAPSHOT_EVERY. Default 1s.
	SnapshotEvery time.Duration
	// IdempotencyTTL is the gateway's SURGE_IDEMPOTENCY_TTL, which order
	// ids are derived with (lookup by customer and key).
	IdempotencyTTL time.Duration
	// TrustedProxies are the proxies in front of the admin listener
	// (SURGE_ADMIN_TRUSTED_PROXIES): their X-Forwarded-Proto makes the
	// session cookie Secure, their X-Forwarded-For names the client whose
	// sign-ins are throttled. Nobody else's headers count.
	TrustedProxies []netip.Prefix
	// Log receives the operators' actions, refused sign-ins and render
	// errors. Default slog.Default().
	Log *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time

	pages   map[string]*template.Template
	rates   *rates
	trends  *trends
	signIns *throttle
	boards  *snapshots[boardData]
	healths *snapshots[healthData]
	// skuLives are the SKU pages' live rows, one per SKU shown.
	skuLives *snapshots[skuLive]
}

func (c *Console) setDefaults() {
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SnapshotEvery <= 0 {
		c.SnapshotEvery = time.Second
	}
}

// Prefix is where the console is mounted.
const Prefix = "/console/"

// Handler returns the console's routes, all under Prefix.
func (c *Console) Handler() http.Handler {
	c.setDefaults()
	c.pages = parsePages()
	c.rates = newRates(c.Now)
	c.trends = &trends{}
	c.signIns = newThrottle(signInFailures, signInWindow, signInAddrs, c.Now)
	c.boards = newSnapshots(c.SnapshotEvery, c.Now, c.buildBoard)
	c.healths = newSnapshots(c.SnapshotEvery, c.Now, c.buildHealth)
	c.skuLives = newSnapshots(c.SnapshotEvery, c.Now, c.buildSKULive)
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", staticFiles(static)))
	mux.HandleFunc("GET /console/login", c.loginPage)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.change(c.logout))

	mux.HandleFunc("GET /console/{$}", c.page(c.board))
	mux.HandleFunc("GET /console/api/board", c.api(c.boardJSON))
	mux.HandleFunc("GET /console/skus/{sku}", c.page(c.sku))
	mux.HandleFunc("GET /console/api/skus/{sku}", c.api(c.skuJSON))
	mux.HandleFunc("POST /console/skus/{sku}/reconcile", c.change(c.reconcileSKU))
	mux.HandleFunc("POST /console/skus/{sku}/stock", c.change(c.loadStock))
	mux.HandleFunc("GET /console/dead-letters", c.page(c.deadLetters))
	mux.HandleFunc("GET /console/dead-letters/{id}", c.page(c.deadLetter))
	mux.HandleFunc("POST /console/dead-letters/replay", c.change(c.replay))
	mux.HandleFunc("POST /console/dead-letters/discard", c.change(c.discard))
	mux.HandleFunc("POST /console/dead-letters/restore", c.change(c.restore))
	mux.HandleFunc("GET /console/reconcile", c.page(c.reconcileHistory))
	mux.HandleFunc("POST /console/reconcile", c.change(c.reconcileAll))
	mux.HandleFunc("GET /console/orders", c.page(c.orderLookup))
	mux.HandleFunc("GET /console/orders/{id}", c.page(c.order))
	mux.HandleFunc("GET /console/health", c.page(c.health))
	return securityHeaders(mux)
}

// securityHeaders keeps the pages to their own origin: no framing, no
// script or style from elsewhere, no sniffing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func staticFiles(root fs.FS) http.Handler {
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=300")
		files.ServeHTTP(w, r)
	})
}

// view is what every page template gets: the page's own data beside the
// operator and the CSRF token its forms carry.
type view struct {
	Title    string
	Nav      string
	Operator string
	CSRF     string
	Flash    string
	Data     any
}

// render writes page name with data, for the signed-in session s.
func (c *Console) render(w http.ResponseWriter, status int, name string, s *session, title, nav string, data any) {
	t, ok := c.pages[name]
	if !ok {
		http.Error(w, "no such page "+name, http.StatusInternalServerError)
		return
	}
	v := view{Title: title, Nav: nav, Data: data}
	if s != nil {
		v.Operator, v.CSRF = s.Operator, c.csrfToken(s)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, "layout", v); err != nil {
		c.Log.Error("console: render", "page", name, "err", err)
	}
}

// fail renders an error page; the message is for operators and keeps the
// cause whole (it names the engine at fault).
func (c *Console) fail(w http.ResponseWriter, s *session, status int, err error) {
	c.render(w, status, "error.html", s, http.StatusText(status), "", struct {
		Status  int
		Message string
	}{status, err.Error()})
}

func parsePages() map[string]*template.Template {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := n[len("templates/"):]
		if base == "layout.html" {
			continue
		}
		pages[base] = template.Must(template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n))
	}
	return pages
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"whenp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000")
	},
	"cents": func(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) },
	// isOrder tells an order id (linked to its page) from a message id
	// that names no order (a poison message's).
	"isOrder": func(id string) bool { return order.ValidateID(id) == nil },
	"rate":    func(f float64) string { return fmt.Sprintf("%.1f", f) },
}
