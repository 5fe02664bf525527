package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/store"
)

// recentOrders is how many of a SKU's orders its page lists, and
// recentLoads how many of its stock loads.
const (
	recentOrders = 20
	recentLoads  = 20
)

type skuData struct {
	Row          boardRow
	Reservations []heldRow
	Orders       []store.OrderRow
	OrdersError  string
	Loads        []store.StockLoad
	LoadsError   string
	CanLoad      bool
	Loaded       *loadResult
	Result       *reconcileResult
}

// loadResult is a stock load made from the page.
type loadResult struct {
	Stock int
	Error string
}

type heldRow struct {
	OrderID    string
	Qty        int
	CustomerID string
	ReservedAt time.Time
}

// reconcileResult is a reconcile run as a page shows it: the plan (a dry
// run) or what was done.
type reconcileResult struct {
	Report admin.ReconcileReport
	Error  string
}

func (c *Console) skuData(ctx context.Context, sku string) (skuData, error) {
	if err := order.ValidateSKU(sku); err != nil {
		return skuData{}, err
	}
	rep, err := c.Stock.Show(ctx, sku)
	if err != nil {
		return skuData{}, err
	}
	p := store.LoadedProduct{Product: store.Product{SKU: sku}}
	if rep.MySQL != nil {
		p.Product = store.Product(*rep.MySQL)
	}
	d := skuData{Row: c.row(p, rep, nil), Reservations: held(rep.Redis)}
	if d.Orders, err = c.Store.RecentOrders(ctx, sku, recentOrders); err != nil {
		d.OrdersError = err.Error()
	}
	if d.Loads, err = c.Store.StockLoads(ctx, sku, recentLoads); err != nil {
		d.LoadsError = err.Error()
	}
	d.CanLoad = c.Loads != nil
	return d, nil
}

// held lists the open reservations, oldest first.
func held(v admin.RedisStock) []heldRow {
	out := make([]heldRow, 0, len(v.Reservations))
	for id, h := range v.Reservations {
		out = append(out, heldRow{OrderID: id, Qty: h.Qty, CustomerID: h.CustomerID, ReservedAt: h.ReservedAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReservedAt.Before(out[j].ReservedAt) })
	if len(out) > 50 {
		out = out[:50]
	}
	return out
}

func (c *Console) sku(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := c.skuData(r.Context(), r.PathValue("sku"))
	if err != nil {
		c.fail(w, s, statusOf(err), err)
		return
	}
	c.render(w, http.StatusOK, "sku.html", s, "SKU "+d.Row.SKU, "board", d)
}

// skuLive is what a SKU page polls: its row, read once per interval for
// every tab showing that SKU.
type skuLive struct {
	Row boardRow
	Err error
}

func (c *Console) buildSKULive(ctx context.Context, sku string) skuLive {
	if err := order.ValidateSKU(sku); err != nil {
		return skuLive{Err: err}
	}
	rep, err := c.Stock.Show(ctx, sku)
	if err != nil {
		return skuLive{Err: err}
	}
	p := store.LoadedProduct{Product: store.Product{SKU: sku}}
	if rep.MySQL != nil {
		p.Product = store.Product(*rep.MySQL)
	}
	return skuLive{Row: c.row(p, rep, nil)}
}

func (c *Console) skuJSON(w http.ResponseWriter, r *http.Request, s *session) {
	sku := r.PathValue("sku")
	if err := order.ValidateSKU(sku); err != nil {
		writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
		return
	}
	d := c.skuLives.get(r.Context(), sku)
	if d.Err != nil {
		writeJSON(w, statusOf(d.Err), map[string]string{"error": d.Err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, d.Row)
}

// reconcileSKU runs the reconciler on one SKU, a dry run unless the form
// says run, and shows the SKU with the report.
func (c *Console) reconcileSKU(w http.ResponseWriter, r *http.Request, s *session) {
	sku := r.PathValue("sku")
	res := c.runReconcile(r.Context(), []string{sku}, r.PostFormValue("mode") != "run", s)
	d, err := c.skuData(r.Context(), sku)
	if err != nil {
		c.fail(w, s, statusOf(err), err)
		return
	}
	d.Result = &res
	c.render(w, http.StatusOK, "sku.html", s, "SKU "+sku, "board", d)
}

func (c *Console) runReconcile(ctx context.Context, skus []string, dryRun bool, s *session) reconcileResult {
	ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	rep, err := c.Reconcile.Run(ctx, admin.ReconcileRequest{SKUs: skus, DryRun: dryRun, Actor: s.Operator})
	res := reconcileResult{Report: rep}
	if err != nil {
		res.Error = err.Error()
	}
	c.Log.Info("console: reconcile", "operator", s.Operator, "skus", skus, "dry_run", dryRun, "err", err)
	return res
}

// statusOf maps the domain's errors to the page's status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, order.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, order.ErrNotFound), errors.Is(err, order.ErrUnknownSKU):
		return http.StatusNotFound
	case errors.Is(err, order.ErrConflict):
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}

// loadStock sets a SKU's total stock, and its purchase limit per customer
// when the form gives one (empty keeps it, 0 clears it), from its page, as
// opsctl stock load does: refused below what is sold or reserved, recorded
// in stock_loads under the signed-in operator.
func (c *Console) loadStock(w http.ResponseWriter, r *http.Request, s *session) {
	sku := r.PathValue("sku")
	res := loadResult{}
	n, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("stock")))
	limit, lerr := formLimit(r.PostFormValue("max_per_customer"))
	switch {
	case c.Loads == nil:
		err = errors.New("stock loads are not available on this console")
	case err != nil:
		err = fmt.Errorf("stock must be a whole number: %w", order.ErrInvalid)
	case lerr != nil:
		err = lerr
	default:
		res.Stock = n
		ctx := admin.WithLoadedBy(r.Context(), admin.LoadedBy{Actor: s.Operator, Via: admin.ViaConsole})
		_, err = c.Loads.Load(ctx, sku, admin.LoadRequest{Stock: &n, MaxPerCustomer: limit})
	}
	if err != nil {
		res.Error = err.Error()
	}
	c.Log.Info("console: stock load", "operator", s.Operator, "sku", sku, "stock", n, "err", err)
	d, derr := c.skuData(r.Context(), sku)
	if derr != nil {
		c.fail(w, s, statusOf(derr), derr)
		return
	}
	d.Loaded = &res
	status := http.StatusOK
	if err != nil {
		status = statusOf(err)
	}
	c.render(w, status, "sku.html", s, "SKU "+sku, "board", d)
}

// formLimit reads the form's purchase limit: nil when left empty (the
// SKU keeps its limit), else a whole number the load validates.
func formLimit(v string) (*int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, fmt.Errorf("limit per customer must be a whole number (0: none): %w", order.ErrInvalid)
	}
	return &n, nil
}
