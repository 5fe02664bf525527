package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/schollz/progressbar/v3"
)

// ShowProgress draws a live progress bar of gen on w (a terminal) until the
// returned stop is called. The bar counts requests for a run bounded by a
// number of requests, and milliseconds for a timed run.
func ShowProgress(ctx context.Context, gen *Generator, w io.Writer, label string) (stop func()) {
	opts := gen.Options()
	total, timed := opts.Requests, opts.Requests == 0 || opts.Rate > 0
	if timed {
		total = opts.Duration.Milliseconds()
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetDescription(label),
	)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			c, elapsed := gen.Snapshot()
			at := c.Done
			if timed {
				at = min(elapsed.Milliseconds(), total)
			}
			_ = bar.Set64(at)
			bar.Describe(fmt.Sprintf("%s %6.0f req/s  202:%d 409:%d other:%d", label,
				float64(c.Done)/max(elapsed.Seconds(), 1e-3), c.Of(http.StatusAccepted), c.Of(http.StatusConflict),
				c.Done-c.Of(http.StatusAccepted)-c.Of(http.StatusConflict)))
		}
	}()
	return func() {
		cancel()
		<-done
		_ = bar.Finish()
		fmt.Fprintln(w)
	}
}
