//go:build faults

package faults

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"time"
)

// procFault kills, terminates or pauses one program. A program ended is
// started again after the hold: its exit is recorded as asked.
func (n *nemesis) procFault(ctx context.Context, f *fault) error {
	pr := n.proc(f.target)
	pid := pr.pid()
	switch f.kind {
	case pauseWorker:
		if err := pr.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		effect, err := stoppedState(pid)
		f.effect = effect + fmt.Sprintf(" for %.1fs (lock TTL %s)", f.hold.Seconds(), n.lockTTL)
		sleep(ctx, f.hold)
		return firstErr(err, pr.signal(syscall.SIGCONT))
	case termWorker, termGateway:
		if err := pr.terminate(20 * time.Second); err != nil {
			return err
		}
		f.effect = fmt.Sprintf("pid %d shut down on SIGTERM", pid)
	default:
		if err := pr.kill(); err != nil {
			return err
		}
		f.effect = fmt.Sprintf("pid %d gone", pid)
	}
	sleep(ctx, f.hold)
	return pr.start()
}

// blackhole drops every packet one program sends to one engine for the
// hold, and longer (up to 5s more) until at least one packet was
// dropped: a cut that met no packet tested nothing.
func (n *nemesis) blackhole(ctx context.Context, f *fault) error {
	fw := n.p.eng.fw
	if fw == nil {
		return fmt.Errorf("no firewall: blackholes need iptables and setpriv as root")
	}
	pr := n.proc(f.target)
	port, what, err := n.enginePort(ctx, f, pr)
	if err != nil {
		return err
	}
	id := fmt.Sprintf("f%d-%s-%d", len(n.list()), f.target, port)
	f.target = fmt.Sprintf("%s (uid %d) -> %s", f.target, pr.uid, what)
	if err := fw.drop(id, pr.uid, port); err != nil {
		return err
	}
	defer n.provokeMySQL(f, pr)()
	sleep(ctx, f.hold)
	dropped := 0
	werr := waitUntil(5*time.Second, 100*time.Millisecond, func() error {
		var err error
		if dropped, err = fw.dropped(id); err == nil && dropped == 0 {
			err = fmt.Errorf("no packet dropped")
		}
		return err
	})
	herr := fw.heal(id)
	if werr == nil {
		f.effect = fmt.Sprintf("%d packets dropped", dropped)
	}
	return firstErr(werr, herr)
}

// provokeMySQL makes a gateway whose MySQL link is cut talk to MySQL while
// the cut lasts: it needs MySQL only for the admin API and the few reads
// the cache misses, so a quiet moment met no packet and proved nothing.
// Its admin readiness probe pings MySQL, as an operator's console does.
// Workers talk to MySQL for every order; nothing is done for them.
func (n *nemesis) provokeMySQL(f *fault, pr *proc) (stop func()) {
	var gw int
	if f.kind != holeMySQL || pr.program != "gateway" {
		return func() {}
	}
	if _, err := fmt.Sscanf(pr.name, "gateway%d", &gw); err != nil || gw >= len(n.p.adminURLs) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := &http.Client{Timeout: time.Second}
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.p.adminURLs[gw]+"/v1/admin/readyz", nil)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
			sleep(ctx, 300*time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// enginePort is the port program pr reaches the fault's engine on: the
// SKU's Redis master, or its proxy to MySQL or RabbitMQ.
func (n *nemesis) enginePort(ctx context.Context, f *fault, pr *proc) (int, string, error) {
	svc := pr.program
	switch f.kind {
	case holeRedis:
		port, err := n.p.eng.redis.masterOf(ctx, f.sku)
		return port, fmt.Sprintf("redis :%d (master of %s)", port, f.sku), err
	case holeMySQL:
		port := proxyPort(n.p.dbProxy[svc])
		return port, fmt.Sprintf("mysql (proxy :%d)", port), nil
	default:
		port := proxyPort(n.p.mqProxy[svc])
		return port, fmt.Sprintf("rabbitmq (proxy :%d)", port), nil
	}
}

// latency adds f.delay each way to every chunk of a service's links to
// MySQL or RabbitMQ, for the hold and until a chunk was delayed (5s more
// at most).
func (n *nemesis) latency(ctx context.Context, f *fault) error {
	px := n.p.mqProxy[f.target]
	engine := "rabbitmq"
	if f.kind == slowMySQL {
		px, engine = n.p.dbProxy[f.target], "mysql"
	}
	f.target = fmt.Sprintf("%s -> %s +%s", f.target, engine, f.delay)
	before, chunks := px.Delayed(), px.Chunks()
	px.SetDelay(f.delay)
	sleep(ctx, f.hold)
	err := waitUntil(5*time.Second, 100*time.Millisecond, func() error {
		if px.Delayed() == before {
			return fmt.Errorf("no chunk delayed")
		}
		return nil
	})
	px.SetDelay(0)
	switch {
	case err == nil:
		f.effect = fmt.Sprintf("%d chunks delayed", px.Delayed()-before)
	case px.Chunks() == chunks:
		// Nothing crossed the link (a worker with no order to write once
		// every SKU sold out): the latency was in place with nothing to
		// slow. A chunk that passed undelayed is still a failure.
		f.effect, err = "no traffic crossed the link while it was slowed", nil
	}
	return err
}

// reset resets every connection of a service to MySQL or RabbitMQ,
// waiting up to 5s for one to be open.
func (n *nemesis) reset(f *fault) error {
	px := n.p.mqProxy[f.target]
	engine := "rabbitmq"
	if f.kind == resetMySQL {
		px, engine = n.p.dbProxy[f.target], "mysql"
	}
	f.target = fmt.Sprintf("%s -> %s", f.target, engine)
	reset := 0
	err := waitUntil(5*time.Second, 100*time.Millisecond, func() error {
		if reset = px.Reset(); reset == 0 {
			return fmt.Errorf("no connection open to reset")
		}
		return nil
	})
	if err == nil {
		f.effect = fmt.Sprintf("%d connections reset", reset)
	}
	return err
}
