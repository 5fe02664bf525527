package loadgen

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"surge/pkg/order"
)

// NewHTTPClient returns a net/http client keeping one idle keep-alive
// connection per worker (the admin API's client).
func NewHTTPClient(concurrency int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        concurrency,
		MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// NewOrderClient returns the client Orders sends with: fasthttp's, which
// spends a fraction of net/http's CPU per request. On a small machine the
// generator shares the cores with the server it measures, so what it saves
// goes to the server.
func NewOrderClient(concurrency int) *fasthttp.Client {
	return &fasthttp.Client{
		Name:                          "surge-loadgen",
		MaxConnsPerHost:               concurrency,
		MaxIdleConnDuration:           90 * time.Second,
		MaxConnWaitTimeout:            10 * time.Second,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
	}
}

// Orders posts orders for one SKU: request i comes from customer
// "<RunID>-<i>" with Idempotency-Key "k<i>", so every request is a new
// order, and a rerun with a new RunID never collides with the idempotency
// records (24 h) of an earlier one. Build it with NewOrders, which sets
// the defaults.
type Orders struct {
	Client *fasthttp.Client
	// BaseURL is the server, e.g. http://127.0.0.1:8080.
	BaseURL string
	SKU     string
	// Qty per order. Default 1 (also for a negative value).
	Qty   int
	RunID string
	// OneCustomer, when set, is the customer of every request (a client
	// hammering under one identity, as a bot does); its keys then carry
	// RunID so a rerun names new orders. Empty: a new customer per request.
	OneCustomer string
	// Start and TTL (SURGE_IDEMPOTENCY_TTL) place the run in its keys'
	// idempotency windows (order.KeyWindow: each key's own): the gateway
	// derives a request's order id in its key's window at arrival, the one
	// holding Start or, for a run that crosses its end, the next. A zero
	// TTL means window 0.
	Start time.Time
	TTL   time.Duration
}

var _ Target = (*Orders)(nil)

// NewOrders returns o with every zero field set to its default.
func NewOrders(o Orders) *Orders {
	o.setDefaults()
	return &o
}

func (o *Orders) setDefaults() {
	if o.Qty <= 0 {
		o.Qty = 1
	}
}

// Customer returns the customer id of request i.
func (o *Orders) Customer(i int64) string {
	if o.OneCustomer != "" {
		return o.OneCustomer
	}
	return o.RunID + "-" + strconv.FormatInt(i, 10)
}

// IdempotencyKey returns the Idempotency-Key of request i.
func (o *Orders) IdempotencyKey(i int64) string {
	if o.OneCustomer != "" {
		return "k" + o.RunID + "-" + strconv.FormatInt(i, 10)
	}
	return "k" + strconv.FormatInt(i, 10)
}

// OrderIDs returns the ids the gateway may derive for request i: in the
// run's first window, or the next.
func (o *Orders) OrderIDs(i int64) [2]string {
	c, k := o.Customer(i), o.IdempotencyKey(i)
	var w int64
	if o.TTL > 0 {
		w = order.KeyWindow(c, k, o.Start, o.TTL)
	}
	return [2]string{order.IDFor(c, k, w), order.IDFor(c, k, w+1)}
}

// Body returns the JSON body of request i appended to buf.
func (o *Orders) Body(buf []byte, i int64) []byte {
	buf = append(buf, `{"sku":`...)
	buf = strconv.AppendQuote(buf, o.SKU)
	buf = append(buf, `,"qty":`...)
	buf = strconv.AppendInt(buf, int64(o.Qty), 10)
	buf = append(buf, `,"customer_id":`...)
	buf = strconv.AppendQuote(buf, o.Customer(i))
	return append(buf, '}')
}

// Do posts order i and reads the answer; ctx's deadline bounds it (a
// fasthttp request cannot be cancelled earlier).
func (o *Orders) Do(ctx context.Context, i int64) (int, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(o.BaseURL + "/v1/orders")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Idempotency-Key", o.IdempotencyKey(i))
	req.SetBodyRaw(o.Body(req.Body()[:0], i))
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	if err := o.Client.DoDeadline(req, resp, deadline); err != nil {
		return 0, fmt.Errorf("post order: %w", err)
	}
	return resp.StatusCode(), nil
}
