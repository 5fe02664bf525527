package queue

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/order"
)

// BenchmarkPublishConfirmed measures confirmed, persistent publishes to a
// quorum queue from many goroutines sharing the default channel pool.
func BenchmarkPublishConfirmed(b *testing.B) {
	conn := dialTest(b, testenv.AMQPURL(b))
	topo := testTopology(b, conn)
	pub := newTestPublisher(b, conn, topo, PublisherOptions{})
	var seq atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			o := order.Order{ID: order.IDFor("bench", fmt.Sprint(i), 0), SKU: "sku-1", Qty: 1, CustomerID: "bench"}
			if err := pub.Publish(context.Background(), o); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkPublishOpenLoop publishes orders at a fixed rate whatever the
// answers (an open loop, as buyers arrive), each order on its own
// goroutine as the gateway's requests are, for several windows of
// messages in flight (PublisherOptions.InFlight). It reports the latency
// of each publish counted from when it was due (p50, p99), the orders per
// message, and this process's CPU per order: what the window trades
// (fewer orders waiting for an earlier confirm against more messages for
// the broker). With delay, every byte to and from the broker is held that
// long each way (latencyLink), so confirms come back as late as on a busy
// machine (make bench's half-rate step saw 10-25 ms per publish) while the
// broker itself stays idle. Run it alone:
//
//	go test -run '^$' -bench PublishOpenLoop -benchtime 4s ./pkg/queue/
func BenchmarkPublishOpenLoop(b *testing.B) {
	for _, delay := range []time.Duration{0, 5 * time.Millisecond} {
		for _, rate := range []int{1000, 2000, 4000} {
			for _, inFlight := range []int{1, 2, 4, 8, 16} {
				b.Run(fmt.Sprintf("delay=%v/rate=%d/in_flight=%d", delay, rate, inFlight), func(b *testing.B) {
					openLoop(b, rate, delay, PublisherOptions{InFlight: inFlight})
				})
			}
		}
	}
}

func openLoop(b *testing.B, rate int, delay time.Duration, opts PublisherOptions) {
	conn := dialTest(b, testenv.AMQPURL(b))
	topo := testTopology(b, conn)
	if delay > 0 {
		u, err := url.Parse(testenv.AMQPURL(b))
		if err != nil {
			b.Fatal(err)
		}
		u.Host = latencyLink(b, u.Host, delay)
		conn = dialTest(b, u.String())
	}
	var messages atomic.Int64
	opts.Sent = func(int) { messages.Add(1) }
	pub := newTestPublisher(b, conn, topo, opts)
	if err := pub.Publish(context.Background(), testOrder(b.N)); err != nil { // opens a channel
		b.Fatal(err)
	}
	messages.Store(0)
	took := make([]time.Duration, b.N)
	interval := time.Second / time.Duration(rate)
	var wg sync.WaitGroup
	cpu := cpuTime()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		wg.Go(func() {
			if err := pub.Publish(context.Background(), testOrder(i)); err != nil {
				b.Error(err)
			}
			took[i] = time.Since(due)
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu = cpuTime() - cpu
	slices.Sort(took)
	ms := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(float64(b.N)/float64(max(messages.Load(), 1)), "orders/msg")
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/order")
	b.ReportMetric(0, "ns/op") // the rate sets the time, not the code
}

// latencyLink forwards TCP connections to target, holding every chunk for
// delay each way without holding the chunks behind it (a link with that
// latency and ample bandwidth), until cleanup. It returns its address.
func latencyLink(tb testing.TB, target string, delay time.Duration) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go delayCopy(up, c, delay)
			go delayCopy(c, up, delay)
		}
	}()
	return ln.Addr().String()
}

// delayCopy copies src to dst, each chunk written delay after it was read.
func delayCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		due  time.Time
		data []byte
	}
	chunks := make(chan chunk, 1<<14)
	go func() {
		defer dst.Close()
		for c := range chunks {
			time.Sleep(time.Until(c.due))
			if _, err := dst.Write(c.data); err != nil {
				return
			}
		}
	}()
	defer close(chunks)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunks <- chunk{time.Now().Add(delay), bytes.Clone(buf[:n])}
		}
		if err != nil {
			return
		}
	}
}

// cpuTime is the CPU time this process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
