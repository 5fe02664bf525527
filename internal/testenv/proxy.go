package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy to a real engine that a test can cut and restore,
// to show what a service does when the engine becomes unreachable without
// stopping the engine other tests share.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]struct{}
	stalled chan struct{} // non-nil while replies are held back
	hold    []byte        // non-nil while requests containing it are held
	held    []*link       // connections holding requests until Deliver
	delay   time.Duration // added to every chunk, each way, while set
	delayed int           // chunks delayed so far
	chunks  int           // chunks forwarded so far, delayed or not
}

// link is one proxied connection: the client's end, the engine's, and
// what Hold keeps from the engine.
type link struct {
	c, up net.Conn

	mu         sync.Mutex
	holding    bool
	pending    [][]byte
	clientGone bool          // the client closed its end while held
	delivered  bool          // Deliver wrote pending to the engine
	answered   chan struct{} // closed once the engine answered after delivery
	once       sync.Once
}

func (l *link) answer() { l.once.Do(func() { close(l.answered) }) }

// NewProxy listens on 127.0.0.1:0 and forwards to target until cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.Resume(); p.Cut() })
	return p
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Stall holds back what the engine sends to its clients, without closing
// anything, until Resume: requests still reach the engine, answers do not
// come back (for a broker: published messages are enqueued, their
// confirms never arrive, as under a memory alarm).
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Resume delivers what Stall held back and lets answers through again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// waitUnstalled returns once answers may pass.
func (p *Proxy) waitUnstalled() {
	p.mu.Lock()
	ch := p.stalled
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// SetDelay adds d to every chunk the proxy forwards, each way, until
// SetDelay(0): an added latency that keeps the connections open.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Delayed is the number of chunks delayed so far.
func (p *Proxy) Delayed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delayed
}

// Chunks is the number of chunks forwarded so far, delayed or not.
func (p *Proxy) Chunks() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.chunks
}

// wait sleeps for the delay set, if any, before a chunk goes on.
func (p *Proxy) wait() {
	p.mu.Lock()
	p.chunks++
	d := p.delay
	if d > 0 {
		p.delayed++
	}
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

// Reset resets every open connection, both ends (RST, not FIN: SO_LINGER
// 0), and returns how many links it reset; new connections pass as before.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
		n++
	}
	p.conns = map[net.Conn]struct{}{}
	return n / 2
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	l := &link{c: c, up: up, answered: make(chan struct{})}
	go p.forward(l)
	buf := make([]byte, 32<<10)
	gone := false
	for {
		n, err := up.Read(buf)
		if n > 0 {
			p.waitUnstalled()
			p.wait()
			l.mu.Lock()
			if l.delivered {
				l.answer()
			}
			l.mu.Unlock()
			if !gone {
				// A client gone does not stop the reading: the engine's
				// answer to what Deliver sent late says it ran.
				_, werr := c.Write(buf[:n])
				gone = werr != nil
			}
		}
		if err != nil {
			break
		}
	}
	l.answer()
	_ = c.Close()
	p.untrack(c, up)
}

// untrack forgets a finished link's two ends.
func (p *Proxy) untrack(a, b net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, a)
	delete(p.conns, b)
}

// forward copies what the client sends to the engine, except what Hold
// keeps back: from the first chunk containing the held pattern on, the
// connection's requests wait for Deliver, even once the client closed its
// end (as TCP delivers what a client wrote before it gave up).
func (p *Proxy) forward(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.c.Read(buf)
		if n > 0 {
			p.wait()
		}
		if n > 0 && !p.keep(l, buf[:n]) {
			if _, werr := l.up.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	l.mu.Lock()
	if l.holding {
		l.clientGone = true // Deliver closes the engine's end
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	_ = l.up.Close()
}

// keep holds chunk back when the link holds, or starts holding with it.
func (p *Proxy) keep(l *link, chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.holding {
		if p.hold == nil || !bytes.Contains(chunk, p.hold) {
			return false
		}
		l.holding = true
		p.held = append(p.held, l)
	}
	l.pending = append(l.pending, bytes.Clone(chunk))
	return true
}

// Hold keeps back, from now on, the requests of every connection from the
// first one whose bytes contain pattern (a script's SHA, an order id):
// they reach the engine only at Deliver, after the client may have given
// up on them. Other connections pass.
func (p *Proxy) Hold(pattern []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = bytes.Clone(pattern)
}

// Holding is the number of connections whose requests are held.
func (p *Proxy) Holding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// Deliver stops holding and sends every held request to the engine, then
// returns once the engine answered each connection (or closed it): the
// requests ran. The connection of a client that gave up is then closed
// for writing, as the kernel sends its FIN after the data.
func (p *Proxy) Deliver(ctx context.Context) error {
	p.mu.Lock()
	held := p.held
	p.hold, p.held = nil, nil
	p.mu.Unlock()
	for _, l := range held {
		l.mu.Lock()
		for _, b := range l.pending {
			if _, err := l.up.Write(b); err != nil {
				l.mu.Unlock()
				return fmt.Errorf("deliver held requests: %w", err)
			}
		}
		l.pending, l.holding, l.delivered = nil, false, true
		gone := l.clientGone
		l.mu.Unlock()
		if tc, ok := l.up.(*net.TCPConn); ok && gone {
			_ = tc.CloseWrite()
		}
	}
	for _, l := range held {
		select {
		case <-l.answered:
		case <-ctx.Done():
			return fmt.Errorf("deliver held requests: no answer: %w", ctx.Err())
		}
	}
	return nil
}

// track registers both ends, unless the proxy was cut meanwhile.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = a.Close()
		_ = b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}
