package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"surge/pkg/admin"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// boardLimit is how many SKUs the board shows: the most recently loaded.
const boardLimit = 50

// boardRow is one SKU on the board: Redis beside MySQL, and the rates.
type boardRow struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	LoadedAt   string `json:"loaded_at"`
	MySQLStock int    `json:"mysql_stock"`
	MySQLSold  int    `json:"mysql_sold"`
	MySQLAvail int    `json:"mysql_avail"`
	// MaxPerCustomer is the purchase limit per customer (0: none).
	MaxPerCustomer int  `json:"max_per_customer"`
	Loaded         bool `json:"redis_loaded"`
	RedisStock     int  `json:"redis_stock"`
	RedisAvail     int  `json:"redis_avail"`
	RedisResv      int  `json:"redis_reserved"`
	RedisSold      int  `json:"redis_sold"`
	Consistent     bool `json:"consistent"`
	// State sums the row up: consistent, in_flight (reservations open,
	// Redis ahead of MySQL), drift (Redis disagrees with nothing in
	// flight: reconcile), not_loaded or error.
	State      string  `json:"state"`
	AcceptedPS float64 `json:"accepted_per_sec"`
	InvoicedPS float64 `json:"invoiced_per_sec"`
	Error      string  `json:"error,omitempty"`
}

type boardData struct {
	Query string     `json:"query"`
	Rows  []boardRow `json:"rows"`
	Error string     `json:"error,omitempty"`
	// At is when the snapshot was read; Trends are the sparklines.
	At     time.Time `json:"at"`
	Trends trendView `json:"trends"`
}

// buildBoard reads the board once: one MySQL query for the SKUs (stock and
// sold included) and one Redis pipeline for their counters
// (stock.ReadCounters). Every viewer gets it through c.boards.
func (c *Console) buildBoard(ctx context.Context, query string) boardData {
	d := boardData{Query: query, Rows: []boardRow{}, At: c.Now().UTC()}
	ps, err := c.Store.RecentProducts(ctx, query, boardLimit)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	skus := make([]string, len(ps))
	for i, p := range ps {
		skus[i] = p.SKU
	}
	var cs []stock.Counters
	if c.Counters != nil {
		cs, err = c.Counters(ctx, skus)
	} else {
		err = errors.New("no Redis to read the counters from")
	}
	d.Rows = make([]boardRow, len(ps))
	for i, p := range ps {
		var rc stock.Counters
		if err == nil {
			rc = cs[i]
		}
		d.Rows[i] = c.boardRow(p, rc, err)
	}
	if query == "" && err == nil {
		c.trends.add(d.At, d.Rows)
	}
	return d
}

// boardRow is one SKU's line from its counters: reserved units are
// derived, and the sum is checked against the open reservations as far as
// counters can (stock.Counters.Balanced); the SKU's page reads them whole.
func (c *Console) boardRow(p store.LoadedProduct, rc stock.Counters, err error) boardRow {
	r := boardRow{SKU: p.SKU, Name: p.Name, LoadedAt: p.LoadedAt.UTC().Format("2006-01-02 15:04:05"),
		MySQLStock: p.Stock, MySQLSold: p.Sold}
	if err != nil {
		r.Error = err.Error()
	} else {
		r.Loaded, r.RedisStock, r.RedisAvail, r.RedisResv, r.RedisSold = rc.Loaded, rc.Stock, rc.Avail, rc.Reserved, rc.Sold
		r.Consistent = rc.Loaded && rc.Balanced() && rc.Stock == p.Stock && rc.Sold == p.Sold
	}
	return c.finish(r)
}

// row is one SKU's line; MySQL's figures come from the Show when it
// answered (they are newer than the listing).
func (c *Console) row(p store.LoadedProduct, rep admin.StockReport, err error) boardRow {
	r := boardRow{SKU: p.SKU, Name: p.Name, LoadedAt: p.LoadedAt.UTC().Format("2006-01-02 15:04:05"),
		MySQLStock: p.Stock, MySQLSold: p.Sold, MaxPerCustomer: p.MaxPerCustomer}
	if err != nil {
		r.Error = err.Error()
	} else {
		if rep.MySQL != nil {
			r.MySQLStock, r.MySQLSold, r.MaxPerCustomer = rep.MySQL.Stock, rep.MySQL.Sold, rep.MySQL.MaxPerCustomer
		}
		v := rep.Redis
		r.Loaded, r.RedisStock, r.RedisAvail, r.RedisResv, r.RedisSold = v.Loaded, v.Stock, v.Avail, v.Reserved, v.Sold
		r.Consistent = rep.Consistent
	}
	return c.finish(r)
}

// finish derives a row's MySQL availability, its state and its rates.
func (c *Console) finish(r boardRow) boardRow {
	r.MySQLAvail = r.MySQLStock - r.MySQLSold
	switch {
	case r.Error != "":
		r.State = "error"
	case !r.Loaded:
		r.State = "not_loaded"
	case r.Consistent:
		r.State = "consistent"
	case r.RedisResv > 0 && r.RedisStock == r.MySQLStock:
		r.State = "in_flight"
	default:
		r.State = "drift"
	}
	r.AcceptedPS, r.InvoicedPS = c.rates.observe(r.SKU, r.RedisSold+r.RedisResv, r.MySQLSold)
	return r
}

func (c *Console) board(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	c.render(w, http.StatusOK, "board.html", s, "Sale board", "board", c.boardView(r.Context(), q))
}

func (c *Console) boardJSON(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	writeJSON(w, http.StatusOK, c.boardView(r.Context(), q))
}

// boardView is the shared snapshot for query, with the trends as of now.
func (c *Console) boardView(ctx context.Context, query string) boardData {
	if len(query) > 100 {
		query = query[:100]
	}
	d := c.boards.get(ctx, query)
	d.Query = query
	d.Trends = c.trends.view(c.Now())
	return d
}
