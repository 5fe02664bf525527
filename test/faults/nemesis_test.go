//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
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
	termWorker  faultKind = "term-worker"        // SIGTERM mid-sale, restarted after the hold
	termGateway faultKind = "term-gateway"       // SIGTERM mid-sale, restarted after the hold
	pauseWorker faultKind = "pause-worker"       // SIGSTOP past the worker's lock TTL, then SIGCONT
	pauseMySQL  faultKind = "pause-mysql"        // SIGSTOP mariadbd, SIGCONT after the hold
	killRedis   faultKind = "kill-redis-master"  // SIGKILL a SKU's master, restart-dead after the hold
	pauseRedis  faultKind = "pause-redis-master" // SIGSTOP a SKU's master past the node timeout

	// Network faults between one program and one engine.
	holeRedis    faultKind = "blackhole-redis"    // a program's packets to a SKU's master dropped 0.5-8s
	holeMySQL    faultKind = "blackhole-mysql"    // a program's packets to MySQL dropped 0.5-8s
	holeRabbit   faultKind = "blackhole-rabbitmq" // a program's packets to RabbitMQ dropped 0.5-8s
	slowMySQL    faultKind = "latency-mysql"      // 20-300ms added each way to a service's MySQL links
	slowRabbit   faultKind = "latency-rabbitmq"   // 20-300ms added each way to a service's RabbitMQ links
	resetMySQL   faultKind = "reset-mysql"        // a service's MySQL connections reset (RST)
	resetRabbit  faultKind = "reset-rabbitmq"     // a service's RabbitMQ connections reset (RST)
	hammerBurst  faultKind = "hammer-restock"     // one customer hammers a sold-out SKU, opsctl restocks it meanwhile
	crowdSoldOut faultKind = "crowd-sold-out"     // many customers hammer the SKU with the fewest units
	restockDown  faultKind = "restock-down"       // an operator lowers a SKU's stock (admin API)
	dlqReplay    faultKind = "dlq-replay"         // an operator replays every dead letter (admin API)
	limitMidSale faultKind = "limit-change"       // an operator lowers the purchase limit, then raises it back (admin API)
)

var faultKinds = []faultKind{memAlarm, closeConns, killWorker, killGateway, termWorker, termGateway, pauseWorker,
	pauseMySQL, killRedis, pauseRedis, holeRedis, holeMySQL, holeRabbit, slowMySQL, slowRabbit, resetMySQL,
	resetRabbit, hammerBurst, crowdSoldOut, restockDown, dlqReplay, limitMidSale}

// blackholes are the kinds that need iptables and setpriv.
var blackholes = []faultKind{holeRedis, holeMySQL, holeRabbit}

// class groups kinds that must not strike at once: two faults of one
// program class would fight over the same processes.
func (k faultKind) class() string {
	switch k {
	case killWorker, termWorker, pauseWorker, killGateway, termGateway:
		return "programs"
	case killRedis, pauseRedis:
		return "redis"
	case pauseMySQL, holeMySQL, slowMySQL, resetMySQL, restockDown, dlqReplay, hammerBurst, limitMidSale:
		// The operator's actions wait on MySQL: under a MySQL fault they
		// would time out rather than be dealt.
		return "mysql"
	}
	return string(k)
}

// fault is one injected fault and when it was active, since the start of
// the sale.
type fault struct {
	kind       faultKind
	target     string
	hold       time.Duration
	start, end time.Duration
	err        string
	effect     string // what showed the fault took effect

	n     int           // the draw's target number, for choices made at injection
	sku   string        // the SKU a fault on one SKU strikes
	skus  []string      // a Redis master's fault: the SKUs that master served
	delay time.Duration // the latency added
}

// losesRedisWrites tells whether the kind can make a Redis master fail
// over and lose its last writes (the compensation's one cause).
func (k faultKind) losesRedisWrites() bool {
	return k == killRedis || k == pauseRedis
}

func (f *fault) record() faultRecord {
	return faultRecord{Kind: f.kind, Target: f.target, Start: f.start, End: f.end, Err: f.err, Effect: f.effect, SKUs: f.skus}
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
	// kinds are the faults to draw from (dealable ones); deck is
	// what is left of their current shuffle.
	kinds, deck []faultKind
	// lockTTL is the workers' lock TTL, maxMySQLPause the longest
	// MariaDB pause (the profile's).
	lockTTL, maxMySQLPause time.Duration

	mu     sync.Mutex
	faults []*fault
}

func newNemesis(p *pipeline, h *history, w *workload, rng *rand.Rand, st settings, logf func(string, ...any)) *nemesis {
	return &nemesis{p: p, h: h, w: w, skus: w.skus, rng: rng, dur: st.duration, kinds: st.kinds, logf: logf,
		lockTTL: st.profile.lockTTL, maxMySQLPause: st.profile.maxMySQLPause}
}

// records are the faults dealt, as the history keeps them.
func (n *nemesis) records() []faultRecord {
	var rs []faultRecord
	for _, f := range n.list() {
		rs = append(rs, f.record())
	}
	return rs
}

// run injects faults until ctx ends; the faults under way when it does
// are healed before run returns. One time in three two faults of
// different classes strike at once.
func (n *nemesis) run(ctx context.Context) {
	for {
		sleep(ctx, time.Duration(1500+n.rng.IntN(2500))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		fs := []*fault{n.draw()}
		if n.rng.IntN(3) == 0 {
			if g := n.draw(); g.kind.class() != fs[0].kind.class() {
				fs = append(fs, g)
			} else {
				n.deck = append([]faultKind{g.kind}, n.deck...) // dealt next time, on its own
			}
		}
		var wg sync.WaitGroup
		for _, f := range fs {
			wg.Go(func() { n.inject(ctx, f) })
		}
		wg.Wait()
		if err := n.p.waitReady(60 * time.Second); err != nil {
			n.logf("not ready after %s: %v", fs[0].kind, err)
		}
	}
}

// draw picks the next fault: the next kind of a shuffled deck of every
// kind (so a run meets each kind once before any twice), then always two
// draws, so a seed replays the same sequence of kinds, holds and targets.
func (n *nemesis) draw() *fault {
	if len(n.deck) == 0 {
		n.deck = append([]faultKind(nil), n.kinds...)
		n.rng.Shuffle(len(n.deck), func(i, j int) { n.deck[i], n.deck[j] = n.deck[j], n.deck[i] })
	}
	kind := n.deck[0]
	n.deck = n.deck[1:]
	r := n.rng.Float64()
	target := n.rng.IntN(1000)
	between := func(lo, hi float64) time.Duration {
		return time.Duration((lo + r*(hi-lo)) * float64(time.Second))
	}
	f := &fault{kind: kind, n: target, sku: n.skus[target%len(n.skus)]}
	switch kind {
	case memAlarm:
		f.hold = between(3, 8)
	case killWorker, termWorker:
		f.hold, f.target = between(1, 4), fmt.Sprintf("worker%d", target%nWorkers)
	case killGateway, termGateway:
		f.hold, f.target = between(1, 4), fmt.Sprintf("gateway%d", target%nGateways)
	case pauseWorker:
		f.hold, f.target = n.lockTTL+between(1, 3), fmt.Sprintf("worker%d", target%nWorkers)
	case pauseMySQL:
		left := n.dur - n.h.since() - time.Second
		f.hold = min(between(5, n.maxMySQLPause.Seconds()), max(left, 5*time.Second))
	case killRedis:
		f.hold = between(2, 10)
	case pauseRedis:
		f.hold = between(6, 9)
	case holeRedis, holeMySQL, holeRabbit:
		f.hold, f.target = between(0.5, 8), n.programName(target)
	case slowMySQL, slowRabbit:
		f.hold, f.target = between(2, 8), []string{"gateway", "worker"}[target%2]
		f.delay = time.Duration(20+(target/2)%281) * time.Millisecond
	case resetMySQL, resetRabbit:
		f.target = []string{"gateway", "worker"}[target%2]
	case hammerBurst, crowdSoldOut:
		f.hold = between(3, 5)
	case limitMidSale:
		f.hold = between(2, 5)
	}
	return f
}

// programName is the gateway or worker n picks.
func (n *nemesis) programName(target int) string {
	if target%2 == 0 {
		return fmt.Sprintf("gateway%d", (target/2)%nGateways)
	}
	return fmt.Sprintf("worker%d", (target/2)%nWorkers)
}

func (n *nemesis) inject(ctx context.Context, f *fault) {
	f.start = n.h.since()
	n.mu.Lock()
	n.faults = append(n.faults, f)
	n.mu.Unlock()
	n.logf("inject %s %s (hold %.1fs)", f.kind, f.target, f.hold.Seconds())
	err := n.apply(ctx, f)
	f.end = n.h.since()
	if err != nil {
		f.err = err.Error()
	}
	n.logf("healed %s", f)
}

// apply breaks something, waits for the hold (cut short at the end of
// the sale) and repairs it.
func (n *nemesis) apply(ctx context.Context, f *fault) error {
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
	case killWorker, killGateway, termWorker, termGateway, pauseWorker:
		return n.procFault(ctx, f)
	case pauseMySQL:
		err := eng.db.pause()
		if err == nil {
			f.effect, err = stoppedState(eng.db.cmd.Process.Pid)
		}
		sleep(ctx, f.hold)
		eng.db.resume()
		return err
	case killRedis, pauseRedis:
		return n.redisFault(ctx, f, f.sku)
	case holeRedis, holeMySQL, holeRabbit:
		return n.blackhole(ctx, f)
	case slowMySQL, slowRabbit:
		return n.latency(ctx, f)
	case resetMySQL, resetRabbit:
		return n.reset(f)
	case hammerBurst:
		return n.hammerRestock(ctx, f)
	case crowdSoldOut:
		return n.crowd(ctx, f)
	case restockDown:
		return n.restockDown(f)
	case dlqReplay:
		return n.replay(f)
	case limitMidSale:
		return n.changeLimit(ctx, f)
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
	for _, other := range n.skus {
		if p, err := c.masterOf(ctx, other); err == nil && p == port {
			f.skus = append(f.skus, other)
		}
	}
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

// dealtAll tells whether every kind of the deck was dealt at least once.
func (n *nemesis) dealtAll() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range n.kinds {
		if !slices.ContainsFunc(n.faults, func(f *fault) bool { return f.kind == k }) {
			return false
		}
	}
	return true
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
