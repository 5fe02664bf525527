// Package floor is what surge's sold-out answer is measured against: a
// handler that reads POST /v1/orders as the gateway does (the same 4 KiB
// limit, unknown fields refused, one JSON object, the Idempotency-Key
// header and the order checked) and gives the gateway's 409 sold_out
// answer, with no engine behind it. On one machine and under one load
// generator, what the gateway spends beyond this floor on a sold-out
// answer is what its engines and its own logic cost; the rest is HTTP,
// JSON and the machine.
package floor

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"surge/pkg/httpapi"
	"surge/pkg/order"
)

// SoldOutMessage is the message of the gateway's sold_out answer (its
// public message for order.ErrSoldOut, pkg/httpapi).
const SoldOutMessage = "not enough units left for this order"

// Handler serves POST /v1/orders, always sold out once the order reads
// well, and GET /healthz. Every answer carries an X-Request-Id, as the
// gateway's do (httpapi.RequestIDs).
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/orders", postOrder)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return httpapi.RequestIDs(mux)
}

// orderRequest is the gateway's order body: pointers, so that a field
// left out is told from a zero.
type orderRequest struct {
	SKU        *string `json:"sku"`
	Qty        *int    `json:"qty"`
	CustomerID *string `json:"customer_id"`
}

// errorBody is the contract's error shape.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func postOrder(w http.ResponseWriter, r *http.Request) {
	var req orderRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "request body is too large")
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request", "body is not a valid order")
		return
	}
	if dec.More() || !atEOF(dec) {
		writeError(w, http.StatusBadRequest, "invalid_request", "body must hold a single JSON object")
		return
	}
	if req.SKU == nil || req.Qty == nil || req.CustomerID == nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "sku, qty and customer_id are required")
		return
	}
	o := order.Order{SKU: *req.SKU, Qty: *req.Qty, CustomerID: *req.CustomerID}
	// The gateway's first steps, in its order, before any engine.
	if err := order.ValidateIdempotencyKey(r.Header.Get("Idempotency-Key")); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if err := o.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	writeError(w, http.StatusConflict, "sold_out", SoldOutMessage)
}

// atEOF tells whether nothing but white space follows the decoded value.
func atEOF(dec *json.Decoder) bool {
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

// writeJSON answers as the gateway does: the header, then the value
// encoded per request.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
