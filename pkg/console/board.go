package console

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"surge/pkg/admin"
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
}

func (c *Console) boardRows(ctx context.Context, query string) boardData {
	d := boardData{Query: query, Rows: []boardRow{}}
	ps, err := c.Store.RecentProducts(ctx, query, boardLimit)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	d.Rows = make([]boardRow, len(ps))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rep, err := c.Stock.Show(ctx, p.SKU)
			d.Rows[i] = c.row(p, rep, err)
		}()
	}
	wg.Wait()
	return d
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
	r.AcceptedPS, r.InvoicedPS = c.rates.observe(p.SKU, r.RedisSold+r.RedisResv, r.MySQLSold)
	return r
}

func (c *Console) board(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	c.render(w, http.StatusOK, "board.html", s, "Sale board", "board", c.boardRows(r.Context(), q))
}

func (c *Console) boardJSON(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	writeJSON(w, http.StatusOK, c.boardRows(r.Context(), q))
}
