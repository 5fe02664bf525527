package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Endpoint serves GET /metrics on its own listener, for programs without an
// HTTP server of their own: the worker, the reconciler, the exporter.
type Endpoint struct {
	ln     net.Listener
	srv    *http.Server
	health atomic.Pointer[func() error]
}

// Listen opens addr ("127.0.0.1:9101", ":0") for Registry, so that a port
// already taken fails at start-up rather than later.
func Listen(addr string) (*Endpoint, error) { return ListenFor(addr, Registry) }

// ListenFor opens addr for the metrics of g.
func ListenFor(addr string, g prometheus.Gatherer) (*Endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	e := &Endpoint{ln: ln}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", HandlerFor(g))
	mux.HandleFunc("GET /healthz", e.healthz)
	e.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    8 << 10,
	}
	return e, nil
}

// SetHealth makes GET /healthz answer 503 with check's error while check
// fails, instead of 200 for as long as the process serves: a liveness
// probe then restarts a process that runs but no longer works (the
// worker's consumer, queue.Consumer.Health).
func (e *Endpoint) SetHealth(check func() error) { e.health.Store(&check) }

func (e *Endpoint) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if check := e.health.Load(); check != nil {
		if err := (*check)(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			body, _ := json.Marshal(map[string]string{"status": "unhealthy", "error": err.Error()})
			_, _ = w.Write(append(body, '\n'))
			return
		}
	}
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// Addr is the address the endpoint listens on.
func (e *Endpoint) Addr() string { return e.ln.Addr().String() }

// Serve answers scrapes until ctx ends, then shuts the server down.
func (e *Endpoint) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- e.srv.Serve(e.ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = e.srv.Shutdown(sctx)
		cancel()
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close releases the listener of an endpoint that never served.
func (e *Endpoint) Close() error { return e.ln.Close() }
