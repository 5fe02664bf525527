//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// faultKind names a fault the nemesis injects.
type faultKind string

const (
	memAlarm    faultKind = "memory-alarm"       // broker blocks publishers
	closeConns  faultKind = "close-connections"  // broker closes every client connection
	killWorker  faultKind = "kill-worker"        // SIGKILL, restarted after the hold
	killGateway faultKind = "kill-gateway"       // SIGKILL, restarted after the hold
	pauseMySQL  faultKind = "pause-mysql"        // SIGSTOP mariadbd, SIGCONT after the hold
	killRedis   faultKind = "kill-redis-master"  // SIGKILL a SKU's master, restart-dead after the hold
	pauseRedis  faultKind = "pause-redis-master" // SIGSTOP a SKU's master past the node timeout
)

var faultKinds = []faultKind{memAlarm, closeConns, killWorker, killGateway, pauseMySQL, killRedis, pauseRedis}

// fault is one injected fault and when it was active, since the start of
// the sale.
type fault struct {
	kind       faultKind
	target     string
	hold       time.Duration
	start, end time.Duration
	err        string
	effect     string // what showed the fault took effect
}

// losesRedisWrites tells whether the kind can make a Redis master fail
// over and lose its last writes (the compensation's one cause).
func (k faultKind) losesRedisWrites() bool {
	return k == killRedis || k == pauseRedis
}

func (f *fault) record() faultRecord {
	return faultRecord{Kind: f.kind, Target: f.target, Start: f.start, End: f.end, Err: f.err, Effect: f.effect}
}

func (f *fault) String() string {
	s := fmt.Sprintf("%s %s +%.1fs..+%.1fs", f.kind, f.target, f.start.Seconds(), f.end.Seconds())
	if f.err != "" {
		s += " (" + f.err + ")"
	}
	if f.effect != "" {
		s += " [" + f.effect + "]"
	}
	return s
}

// nemesis injects one fault at a time, drawn from its seed, with a quiet
// spell and a recovery (every gateway ready) between two.
type nemesis struct {
	p    *pipeline
	h    *history
	w    *workload
	skus []string
	rng  *rand.Rand
	dur  time.Duration
	logf func(format string, args ...any)
	// kinds are the faults to draw from (faultKinds when empty); deck is
	// what is left of their current shuffle.
	kinds, deck []faultKind

	mu     sync.Mutex
	faults []*fault
}

func newNemesis(p *pipeline, h *history, w *workload, rng *rand.Rand, st settings, logf func(string, ...any)) *nemesis {
	return &nemesis{p: p, h: h, w: w, skus: w.skus, rng: rng, dur: st.duration, kinds: st.kinds, logf: logf}
}

// records are the faults dealt, as the history keeps them.
func (n *nemesis) records() []faultRecord {
	var rs []faultRecord
	for _, f := range n.list() {
		rs = append(rs, f.record())
	}
	return rs
}

// run injects faults until ctx ends; the fault under way when it does is
// healed before run returns.
func (n *nemesis) run(ctx context.Context) {
	for {
		sleep(ctx, time.Duration(2000+n.rng.IntN(3000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		f, sku := n.draw()
		n.inject(ctx, f, sku)
		if err := n.p.waitReady(60 * time.Second); err != nil {
			n.logf("+%.1fs not ready after %s: %v", n.h.since().Seconds(), f.kind, err)
		}
	}
}

// draw picks the next fault: the next kind of a shuffled deck of every
// kind (so a run meets each kind once before any twice), then always two
// draws, so a seed replays the same sequence of kinds, holds and targets.
func (n *nemesis) draw() (*fault, string) {
	if len(n.deck) == 0 {
		n.deck = append([]faultKind(nil), n.kinds...)
		if len(n.deck) == 0 {
			n.deck = append(n.deck, faultKinds...)
		}
		n.rng.Shuffle(len(n.deck), func(i, j int) { n.deck[i], n.deck[j] = n.deck[j], n.deck[i] })
	}
	kind := n.deck[0]
	n.deck = n.deck[1:]
	r := n.rng.Float64()
	target := n.rng.IntN(1000)
	between := func(lo, hi float64) time.Duration {
		return time.Duration((lo + r*(hi-lo)) * float64(time.Second))
	}
	f := &fault{kind: kind}
	sku := n.skus[target%len(n.skus)]
	switch kind {
	case memAlarm:
		f.hold = between(3, 8)
	case killWorker:
		f.hold, f.target = between(1, 4), fmt.Sprintf("worker%d", target%nWorkers)
	case killGateway:
		f.hold, f.target = between(1, 4), fmt.Sprintf("gateway%d", target%nGateways)
	case pauseMySQL:
		left := n.dur - n.h.since() - time.Second
		f.hold = min(between(5, 90), max(left, 5*time.Second))
	case killRedis:
		f.hold = between(2, 10)
	case pauseRedis:
		f.hold = between(6, 9)
	}
	return f, sku
}

func (n *nemesis) inject(ctx context.Context, f *fault, sku string) {
	f.start = n.h.since()
	n.mu.Lock()
	n.faults = append(n.faults, f)
	n.mu.Unlock()
	n.logf("inject %s %s (hold %.1fs)", f.kind, f.target, f.hold.Seconds())
	err := n.apply(ctx, f, sku)
	f.end = n.h.since()
	if err != nil {
		f.err = err.Error()
	}
	n.logf("healed %s", f)
}

// apply breaks something, waits for the hold (cut short at the end of
// the sale) and repairs it.
func (n *nemesis) apply(ctx context.Context, f *fault, sku string) error {
	eng := n.p.eng
	switch f.kind {
	case memAlarm:
		err := eng.mq.setAlarm()
		if err == nil {
			f.effect, err = eng.mq.alarmed()
		}
		sleep(ctx, f.hold)
		return firstErr(err, eng.mq.clearAlarm())
	case closeConns:
		var err error
		f.effect, err = eng.mq.closeConnections()
		return err
	case killWorker, killGateway:
		pr := n.proc(f.target)
		pid := pr.pid()
		if err := pr.kill(); err != nil {
			return err
		}
		f.effect = fmt.Sprintf("pid %d gone", pid)
		sleep(ctx, f.hold)
		return pr.start()
	case pauseMySQL:
		err := eng.db.pause()
		if err == nil {
			f.effect, err = stoppedState(eng.db.cmd.Process.Pid)
		}
		sleep(ctx, f.hold)
		eng.db.resume()
		return err
	case killRedis, pauseRedis:
		return n.redisFault(ctx, f, sku)
	}
	return fmt.Errorf("unknown fault %s", f.kind)
}

func (n *nemesis) redisFault(ctx context.Context, f *fault, sku string) error {
	c := n.p.eng.redis
	port, err := c.masterOf(ctx, sku)
	if err != nil {
		return err
	}
	f.target = fmt.Sprintf("127.0.0.1:%d (master of %s)", port, sku)
	sig := syscall.SIGKILL
	if f.kind == pauseRedis {
		sig = syscall.SIGSTOP
	}
	pid := c.PID(port)
	if err := c.Signal(port, sig); err != nil {
		return err
	}
	if sig == syscall.SIGSTOP {
		f.effect, err = stoppedState(pid)
	} else {
		err = waitUntil(5*time.Second, 50*time.Millisecond, func() error {
			if c.PID(port) != 0 {
				return fmt.Errorf("node %d (pid %d) still alive after SIGKILL", port, pid)
			}
			return nil
		})
		f.effect = fmt.Sprintf("node %d (pid %d) gone", port, pid)
	}
	sleep(ctx, f.hold)
	_ = c.Signal(port, syscall.SIGCONT) // a killed node has no process to resume
	if now, merr := c.masterOf(context.Background(), sku); merr == nil && now != port {
		f.effect += fmt.Sprintf("; failover: %d now serves %s", now, sku)
	}
	return firstErr(err, c.Heal())
}

// stoppedState reads /proc/pid/stat and tells whether pid is stopped
// (SIGSTOP took effect).
func stoppedState(pid int) (string, error) {
	var state string
	err := waitUntil(2*time.Second, 20*time.Millisecond, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		// pid (comm) state ...: comm may hold spaces, the state follows its ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) == 0 {
			return fmt.Errorf("/proc/%d/stat: %q", pid, s)
		}
		state = fields[0]
		if state != "T" && state != "t" {
			return fmt.Errorf("pid %d in state %s, not stopped", pid, state)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("pid %d stopped", pid), nil
}

func (n *nemesis) proc(name string) *proc {
	for _, pr := range n.p.procs() {
		if pr.name == name {
			return pr
		}
	}
	panic("no process " + name)
}

func (n *nemesis) list() []*fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*fault(nil), n.faults...)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
