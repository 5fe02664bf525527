// Package httpapi serves surge's HTTP contract (docs/API.md,
// api/openapi.yaml) on two listeners: the public one (orders, products,
// health and readiness, the API document) and the admin one (the admin
// API behind a bearer token, metrics, the operations console), so that
// nothing an operator uses is reachable where customers are.
package httpapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"surge/pkg/admin"
	"surge/pkg/gateway"
	"surge/pkg/order"
)

// Acceptor takes orders. *gateway.Service implements it. RefuseSoldOut,
// asked first, answers an order sold out from a read made for it with
// nothing written and no budget spent (nil: go on). Refused turns a
// refusal decided before Accept (the client address over its budget)
// into the truthful answer: the refusal, or an unknown outcome when the
// key already names an order that may be taken.
type Acceptor interface {
	RefuseSoldOut(ctx context.Context, o order.Order, idemKey string) error
	Accept(ctx context.Context, o order.Order, idemKey string) (gateway.Accepted, error)
	Refused(ctx context.Context, o order.Order, idemKey string, cause error) error
}

// StatusReader answers order status. *gateway.Tracker implements it.
type StatusReader interface {
	Status(ctx context.Context, id string) (gateway.OrderView, error)
}

// StockAdmin loads and shows stock. *ops.Stock implements it.
type StockAdmin interface {
	Load(ctx context.Context, sku string, req admin.LoadRequest) (admin.StockReport, error)
	Show(ctx context.Context, sku string) (admin.StockReport, error)
}

// Check is one readiness probe: a named dependency and how to ping it.
type Check struct {
	Name string
	Ping func(ctx context.Context) error
}

// Server holds the handlers' dependencies. Optional routes (products,
// dead letters) are mounted by their own Mount functions, public ones with
// Handle and admin ones with HandleAdmin.
type Server struct {
	Orders     Acceptor
	Status     StatusReader
	Stock      StockAdmin
	Ready      []Check
	AdminToken string
	Log        *slog.Logger
	// IPLimit rate-limits POST /v1/orders per client IP (429 with
	// Retry-After). Nil means no limit. The per-customer limit is Orders'
	// (an error wrapping order.ErrRateLimited, answered the same way).
	IPLimit Limiter
	// LimitObserver, when set, is told each of IPLimit's decisions
	// (metrics).
	LimitObserver LimitObserver
	// TrustedProxies are the proxies whose X-Forwarded-For the per-IP
	// limit believes (see ClientIP). None means the peer's address is
	// the client's.
	TrustedProxies []netip.Prefix
	// RatePolicies describe the budgets by scope ("customer", "ip") for
	// the RateLimit-Policy header of a 429.
	RatePolicies map[string]RatePolicy
	// OpenAPI, when set, is served at GET /openapi.yaml.
	OpenAPI []byte
	// Customers, when set, requires a customer's bearer token on the
	// order routes (customers.go); nil: customer_id is the body's.
	Customers CustomerVerifier
	// AdminReady are the probes of GET /v1/admin/readyz on the admin
	// listener (every engine, MySQL included), answered with each
	// failure's detail, behind the admin token. Ready are the public
	// /readyz's: what taking an order needs (Redis, RabbitMQ; no order
	// touches MySQL on its way in, so a MySQL outage must not take
	// gateways out of their load balancer), each answered "ok" or
	// "unavailable", nothing more.
	AdminReady []Check

	log   *slog.Logger
	mux   *http.ServeMux
	admux *http.ServeMux
}

// Handler builds the public routes and the admin ones (AdminHandler).
// Call it once, after setting the fields.
func (s *Server) Handler() http.Handler {
	s.log = s.Log
	if s.log == nil {
		s.log = slog.Default()
	}
	s.mux = http.NewServeMux()
	s.admux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/orders", s.postOrder)
	s.mux.HandleFunc("GET /v1/orders/{id}", s.getOrder)
	s.admux.HandleFunc("PUT /v1/admin/stock/{sku}", s.admin(s.putStock))
	s.admux.HandleFunc("GET /v1/admin/stock/{sku}", s.admin(s.getStock))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz(s.Ready, false))
	s.admux.HandleFunc("GET /v1/admin/readyz", s.admin(s.readyz(s.AdminReady, true)))
	if len(s.OpenAPI) > 0 {
		s.mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(s.OpenAPI)
		})
	}
	return s.mux
}

// AdminHandler is the admin listener's routes, built by Handler: the admin
// API and whatever HandleAdmin mounted (metrics, the console). Anything
// else is 404 there, the public routes included.
func (s *Server) AdminHandler() http.Handler { return s.admux }

// Handle mounts an extra public route (products).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandleAdmin mounts an extra route on the admin listener (dead letters,
// reconcile, metrics, the console). The caller decides how it is guarded.
func (s *Server) HandleAdmin(pattern string, h http.Handler) { s.admux.Handle(pattern, h) }

// Admin wraps h with the bearer-token check, for routes mounted later.
func (s *Server) Admin(h http.HandlerFunc) http.HandlerFunc { return s.admin(h) }

// WriteError answers err in the contract's error shape.
func (s *Server) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeError(w, r, err)
}

// admin requires "Authorization: Bearer <token>", compared in constant
// time. An empty configured token disables the admin API.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || s.AdminToken == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.AdminToken)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="surge-admin"`)
			s.writeError(w, r, &apiError{http.StatusUnauthorized, "unauthorized", "a valid admin bearer token is required"})
			return
		}
		h(w, r)
	}
}

type orderRequest struct {
	SKU        *string `json:"sku"`
	Qty        *int    `json:"qty"`
	CustomerID *string `json:"customer_id"`
}

func (req orderRequest) order() (order.Order, error) {
	switch {
	case req.SKU == nil:
		return order.Order{}, order.Invalid("sku is required")
	case req.Qty == nil:
		return order.Order{}, order.Invalid("qty is required")
	case req.CustomerID == nil:
		return order.Order{}, order.Invalid("customer_id is required")
	}
	return order.Order{SKU: *req.SKU, Qty: *req.Qty, CustomerID: *req.CustomerID}, nil
}

// postOrder takes an order. An order for a SKU with no unit left is
// answered sold out first, from a read made for it, without spending the
// client address's budget: the bulk of a flash sale costs no write. The
// address's budget is checked once the body is read: a refused retry of
// an order that may be taken must be answered as unknown, not as not
// taken.
func (s *Server) postOrder(w http.ResponseWriter, r *http.Request) {
	customer, ok := s.customer(w, r)
	if !ok {
		return
	}
	var req orderRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := ownCustomer(&req, customer); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := req.order()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if err := s.Orders.RefuseSoldOut(r.Context(), o, key); err != nil {
		s.writeError(w, r, err)
		return
	}
	if limited := s.overLimit(r, s.IPLimit, ClientIP(r, s.TrustedProxies)); limited != nil {
		s.writeError(w, r, s.Orders.Refused(r.Context(), o, key, limited))
		return
	}
	acc, err := s.Orders.Accept(r.Context(), o, key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/orders/"+acc.OrderID)
	writeJSON(w, http.StatusAccepted, acc)
}

// getOrder shows an order; with customer tokens on, only to its
// customer: another's is answered 404 like an unknown id, so that ids
// cannot be probed.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	customer, ok := s.customer(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if !ownsOrder(id, customer) {
		s.writeError(w, r, fmt.Errorf("order %q: %w", id, order.ErrNotFound))
		return
	}
	v, err := s.Status.Status(r.Context(), id)
	if err == nil && customer != "" && v.CustomerID != customer {
		err = fmt.Errorf("order %q: %w", id, order.ErrNotFound)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) putStock(w http.ResponseWriter, r *http.Request) {
	var req admin.LoadRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The load is audited (stock_loads) under X-Surge-Operator, else
	// DefaultOperator, the admin token's name.
	who := actor(r)
	if err := admin.ValidateActor(who); err != nil {
		s.writeError(w, r, fmt.Errorf("%s: %w", OperatorHeader, err))
		return
	}
	ctx := admin.WithLoadedBy(r.Context(), admin.LoadedBy{Actor: who, Via: admin.ViaAdminAPI})
	rep, err := s.Stock.Load(ctx, r.PathValue("sku"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) getStock(w http.ResponseWriter, r *http.Request) {
	rep, err := s.Stock.Show(r.Context(), r.PathValue("sku"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// readyz probes checks: 200 when every one answers, else 503, with a
// status per dependency. Without detail a failure reads "unavailable":
// the public listener tells nobody a driver's error or an internal
// address; the admin one (detail) gives the error.
func (s *Server) readyz(checks []Check, detail bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, code := map[string]string{}, http.StatusOK
		for _, c := range checks {
			err := c.Ping(ctx)
			switch {
			case err == nil:
				status[c.Name] = "ok"
				continue
			case detail:
				status[c.Name] = fmt.Sprintf("down: %v", err)
			default:
				status[c.Name] = "unavailable"
			}
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, status)
	}
}

// NewHTTPServer wraps h with the timeouts and header limit every surge
// server uses.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    8 << 10,
	}
}
