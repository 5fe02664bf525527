package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"surge/pkg/order"
)

// NewHTTPClient returns a client that keeps one idle keep-alive connection
// per worker, so a closed loop reuses its connections instead of dialling.
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

// Orders posts orders for one SKU: request i comes from customer
// "<RunID>-<i>" with Idempotency-Key "k<i>", so every request is a new
// order, and a rerun with a new RunID never collides with the idempotency
// records (24 h) of an earlier one.
type Orders struct {
	Client *http.Client
	// BaseURL is the server, e.g. http://127.0.0.1:8080.
	BaseURL string
	SKU     string
	// Qty per order. Default 1.
	Qty   int
	RunID string

	once sync.Once
	url  string
}

var _ Target = (*Orders)(nil)

// Customer returns the customer id of request i.
func (o *Orders) Customer(i int64) string { return o.RunID + "-" + strconv.FormatInt(i, 10) }

// IdempotencyKey returns the Idempotency-Key of request i.
func (o *Orders) IdempotencyKey(i int64) string { return "k" + strconv.FormatInt(i, 10) }

// OrderID returns the id the gateway derives for request i.
func (o *Orders) OrderID(i int64) string { return order.IDFor(o.Customer(i), o.IdempotencyKey(i)) }

func (o *Orders) qty() int {
	if o.Qty > 0 {
		return o.Qty
	}
	return 1
}

// Body returns the JSON body of request i appended to buf.
func (o *Orders) Body(buf []byte, i int64) []byte {
	buf = append(buf, `{"sku":`...)
	buf = strconv.AppendQuote(buf, o.SKU)
	buf = append(buf, `,"qty":`...)
	buf = strconv.AppendInt(buf, int64(o.qty()), 10)
	buf = append(buf, `,"customer_id":`...)
	buf = strconv.AppendQuote(buf, o.Customer(i))
	return append(buf, '}')
}

// Do posts order i and drains the answer so the connection is reused.
func (o *Orders) Do(ctx context.Context, i int64) (int, error) {
	o.once.Do(func() { o.url = o.BaseURL + "/v1/orders" })
	// A fresh body each time: the transport may still read it after Do
	// returns, so it cannot be pooled.
	body := o.Body(make([]byte, 0, 96), i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build order request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", o.IdempotencyKey(i))
	resp, err := o.Client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post order: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("read order answer: %w", err)
	}
	return resp.StatusCode, nil
}
