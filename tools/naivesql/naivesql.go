// Package naivesql is the baseline surge is measured against: the order
// endpoint people write first, one MySQL transaction per request on the
// product's hot row (a guarded UPDATE of the stock, then the invoice
// insert), answered once it commits. It speaks the same POST /v1/orders
// contract as the gateway so the same load generator drives both.
package naivesql

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-sql-driver/mysql"

	"surge/pkg/order"
)

// Server answers orders straight from MySQL (the schema of sql/).
type Server struct {
	DB  *sql.DB
	Log *slog.Logger
}

// Handler serves POST /v1/orders, PUT /v1/admin/stock/{sku} (no auth: a
// benchmark fixture) and GET /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/orders", s.postOrder)
	mux.HandleFunc("PUT /v1/admin/stock/{sku}", s.putStock)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

type orderRequest struct {
	SKU        string `json:"sku"`
	Qty        int    `json:"qty"`
	CustomerID string `json:"customer_id"`
}

func (s *Server) postOrder(w http.ResponseWriter, r *http.Request) {
	var req orderRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "body is not a valid order")
		return
	}
	o := order.Order{SKU: req.SKU, Qty: req.Qty, CustomerID: req.CustomerID}
	key := r.Header.Get("Idempotency-Key")
	if err := o.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if err := order.ValidateIdempotencyKey(key); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	o.ID = order.IDFor(o.CustomerID, key, 0)
	sold, err := s.sell(r, o)
	switch {
	case err != nil:
		s.Log.Error("naive order failed", "order_id", o.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "retry later")
	case !sold:
		writeError(w, http.StatusConflict, "sold_out", "not enough units left for this order")
	default:
		writeJSON(w, http.StatusAccepted, map[string]any{"order_id": o.ID, "status": order.StatusInvoiced, "sku": o.SKU, "qty": o.Qty})
	}
}

// sell runs the order's transaction: take the units if they are there,
// then write the invoice. A repeated order id finds its invoice and is
// answered as sold again.
func (s *Server) sell(r *http.Request, o order.Order) (sold bool, err error) {
	ctx := r.Context()
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil || !sold {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, "UPDATE products SET sold = sold + ? WHERE sku = ? AND sold + ? <= stock", o.Qty, o.SKU, o.Qty)
	if err != nil {
		return false, fmt.Errorf("take stock sku=%s: %w", o.SKU, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO invoices (order_id, sku, qty, amount_cents)
		SELECT ?, sku, ?, price_cents * ? FROM products WHERE sku = ?`, o.ID, o.Qty, o.Qty, o.SKU)
	var merr *mysql.MySQLError
	if errors.As(err, &merr) && merr.Number == 1062 { // duplicate order id: already sold
		_ = tx.Rollback()
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("insert invoice order=%s: %w", o.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit order=%s: %w", o.ID, err)
	}
	return true, nil
}

type stockRequest struct {
	Stock      *int   `json:"stock"`
	PriceCents *int64 `json:"price_cents"`
}

func (s *Server) putStock(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	var req stockRequest
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&req)
	if err != nil || req.Stock == nil || *req.Stock < 0 || order.ValidateSKU(sku) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "want a valid sku and {\"stock\":N}")
		return
	}
	var price int64
	if req.PriceCents != nil {
		price = *req.PriceCents
	}
	_, err = s.DB.ExecContext(r.Context(), `INSERT INTO products (sku, price_cents, stock) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE stock = VALUES(stock), price_cents = VALUES(price_cents)`, sku, price, *req.Stock)
	if err != nil {
		s.Log.Error("naive stock load failed", "sku", sku, "err", err)
		writeError(w, http.StatusConflict, "conflict", "stock not set (below what is sold?)")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sku": sku, "stock": *req.Stock})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
