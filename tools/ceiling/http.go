package ceiling

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"time"

	"surge/tools/loadgen"
)

// HTTPOptions tune the HTTP ceiling. The zero value means the defaults.
type HTTPOptions struct {
	// Concurrency of the closed loop. Default 256.
	Concurrency int
	// Duration of the measurement. Default 3s.
	Duration time.Duration
}

func (o *HTTPOptions) setDefaults() {
	if o.Concurrency == 0 {
		o.Concurrency = 256
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
}

// HTTPEmpty measures the load generator posting orders to a handler that
// reads the body and answers 409 at once, in this process, over loopback:
// the most requests per second this machine's HTTP stack and generator
// allow before any engine is involved.
func HTTPEmpty(ctx context.Context, opts HTTPOptions) (Result, error) {
	opts.setDefaults()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, fmt.Errorf("http ceiling: listen: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":{"code":"sold_out","message":"not enough units left for this order"}}`+"\n")
	})}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		<-errc // http.ErrServerClosed: the measurement is over
	}()
	gen, err := loadgen.New(loadgen.Options{Concurrency: opts.Concurrency, Duration: opts.Duration},
		loadgen.NewOrders(loadgen.Orders{Client: loadgen.NewOrderClient(opts.Concurrency), BaseURL: "http://" + ln.Addr().String(),
			SKU: "ceiling", RunID: "ceiling"}))
	if err != nil {
		return Result{}, fmt.Errorf("http ceiling: %w", err)
	}
	res := gen.Run(ctx)
	if n := res.Counts.Of(http.StatusConflict); n != res.Counts.Done {
		return Result{}, fmt.Errorf("http ceiling: %d of %d requests answered (errors %q)", n, res.Counts.Done, res.ErrorSamples)
	}
	return Result{Name: "http_empty_handler", Workers: opts.Concurrency, Ops: res.Counts.Done, Seconds: res.Seconds,
		PerSec: math.Round(res.RPS), Setup: fmt.Sprintf("loadgen to an in-process handler that answers 409 at once, %d concurrent", opts.Concurrency)}, nil
}
