//go:build faults

package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"surge/pkg/ratelimit"
)

const (
	burstPace    = 3 * time.Millisecond // one customer, about 300 requests/s: far past its budget (20/s)
	crowdSize    = 20                   // customers of the crowd
	crowdPace    = 100 * time.Millisecond
	restockBurst = 5 // units the hammer-restock adds behind the gateways' back
)

// hammerRestock is the abusive client of a flash sale: one customer
// hammers the SKU with the fewest units left, past its rate budget, while
// an operator adds units through opsctl (behind the gateways' back): the
// other buyers must still get them (check 7b judges every 409 they meet).
// Its effect is shown by its answers, whatever answered them: it sent
// more than its budget admits in the time (burst + rate x hold), no more
// of its orders than that budget admits were taken or left unknown, and
// the restock was taken (200). Refusals answered sold out from a read
// spend no budget, so 429s alone no longer show the hammer was held back.
func (n *nemesis) hammerRestock(ctx context.Context, f *fault) error {
	f.sku = n.w.lowestSKU()
	f.target = f.sku
	customer := fmt.Sprintf("r%d-burst%d", n.w.run, len(n.list()))
	var mu sync.Mutex
	answers := map[string]int{}
	taken := 0 // answered 202 or 503 outcome_unknown: admitted by the budget
	hctx, cancel := context.WithTimeout(ctx, f.hold)
	defer cancel()
	done := make(chan struct{})
	begin := time.Now()
	go func() {
		n.w.hammerFor(hctx, customer, f.sku, burstPace, func(a attempt) {
			mu.Lock()
			answers[a.answer()]++
			if a.Status == http.StatusAccepted || a.Code == "outcome_unknown" {
				taken++
			}
			mu.Unlock()
		})
		close(done)
	}()
	sleep(hctx, f.hold/3)
	r := n.w.restockOpsctl(f.sku, restockBurst)
	<-done
	return hammerEffect(f, answers, taken, time.Since(begin), r)
}

// hammerEffect judges what the hammer of hammerRestock met: answers by
// answer, taken of them admitted past the customer's budget (a 202, or an
// outcome unknown: each spent the budget), over took (from its first
// request to its last answer).
func hammerEffect(f *fault, answers map[string]int, taken int, took time.Duration, r restock) error {
	sent := 0
	for _, k := range answers {
		sent += k
	}
	budget := ratelimit.DefaultCustomerBurst + int(ratelimit.DefaultCustomerRate*took.Seconds()+1)
	switch {
	case r.Status != http.StatusOK:
		return fmt.Errorf("restock behind the gateways' back not taken: %s", r)
	case sent <= budget:
		return fmt.Errorf("%d requests in %v, within the customer's budget of %d: no hammering", sent, took.Round(time.Millisecond), budget)
	case taken > budget:
		return fmt.Errorf("%d of the hammer's %d orders taken or unknown (%s), past its budget of %d: the budget did not hold",
			taken, sent, countLine(answers), budget)
	}
	f.effect = fmt.Sprintf("%d requests in %v, past the budget of %d: %s; %s", sent, took.Round(time.Millisecond), budget,
		countLine(answers), r)
	return nil
}

// crowd is many customers, each within its budget, hammering the SKU
// with the fewest units left until it is sold out and past.
func (n *nemesis) crowd(ctx context.Context, f *fault) error {
	f.sku = n.w.lowestSKU()
	f.target = f.sku
	var soldOut, sent atomic.Int64
	cctx, cancel := context.WithTimeout(ctx, f.hold)
	defer cancel()
	var wg sync.WaitGroup
	for i := range crowdSize {
		customer := fmt.Sprintf("r%d-crowd%d-%d", n.w.run, len(n.list()), i)
		wg.Go(func() {
			n.w.hammerFor(cctx, customer, f.sku, crowdPace, func(a attempt) {
				sent.Add(1)
				if a.Status == http.StatusConflict && a.Code == "sold_out" {
					soldOut.Add(1)
				}
			})
		})
	}
	wg.Wait()
	if soldOut.Load() == 0 {
		return fmt.Errorf("%d requests of %d customers, none answered 409 sold_out", sent.Load(), crowdSize)
	}
	f.effect = fmt.Sprintf("%d of %d requests answered 409 sold_out", soldOut.Load(), sent.Load())
	return nil
}

// restockDown is an operator lowering the stock of the SKU with the most
// units left by 1-6 units through the admin API, no more than the last
// sample showed unsold: taken (200),
// or refused because the units were sold or reserved meanwhile (409);
// either answer is the action's effect.
func (n *nemesis) restockDown(f *fault) error {
	f.sku = n.w.highestSKU()
	f.target = f.sku
	down := 1 + f.n%6
	if avail := n.w.lastAvail(f.sku); avail > 0 {
		down = min(down, avail)
	}
	// An operator whose gateway refuses the connection (it is being
	// restarted) uses another one: a refused connection sent nothing.
	var r restock
	for i := range len(n.p.urls) {
		r = n.w.restock(f.sku, -down, (f.n+i)%len(n.p.urls))
		if r.Status != 0 || !strings.Contains(r.Err, syscall.ECONNREFUSED.Error()) {
			break
		}
	}
	switch r.Status {
	case 0:
		return fmt.Errorf("restock down: no answer: %s", r.Err)
	case http.StatusOK, http.StatusConflict:
		f.effect = r.String()
		return nil
	}
	return fmt.Errorf("restock down: answered %s, neither taken (200) nor refused below what is sold and reserved (409)", r)
}

// changeLimit is an operator lowering the purchase limit of the SKU that
// has one (hammerLimit) through the admin API, to 1 or 2, and raising it
// back after the hold. The orders answered 202 before the lowering keep
// the limit they were accepted under (check L judges each customer by the
// limits in force while its orders were placed), the ones after meet the
// lower one. Where the firewall is set up, every other time the lowering
// goes through a gateway whose link to the SKU's Redis master is cut
// while it runs (lowerLosingReply). Any answer to both loads is the
// action's effect; a load no gateway answered is an error.
func (n *nemesis) changeLimit(ctx context.Context, f *fault) error {
	f.sku = n.skus[0]
	f.target = f.sku
	low := 1 + (f.n/2)%(hammerLimit-1)
	var down limitChange
	var lost string
	if n.p.eng.fw != nil && f.n%2 == 0 {
		var err error
		if down, lost, err = n.lowerLosingReply(ctx, f, low); err != nil {
			return err
		}
	} else {
		down = n.w.setLimit(f.sku, low, f.n)
	}
	if down.Status == 0 {
		return fmt.Errorf("lower the limit: no answer: %s", down.Err)
	}
	sleep(ctx, f.hold)
	up := n.w.setLimit(f.sku, hammerLimit, f.n+1)
	if up.Status == 0 {
		return fmt.Errorf("raise the limit back: no answer: %s", up.Err)
	}
	f.effect = fmt.Sprintf("%s%s; %s", down, lost, up)
	return nil
}

// lowerLosingReply lowers sku's limit to low through a gateway whose
// packets to the SKU's Redis master are dropped until the load is
// answered: its Redis call goes unanswered (a late copy may still reach
// Redis after the heal). Unless it was answered 200 (a failover moved the
// SKU meanwhile), MySQL must still hold the limit it had, the looser
// (README, the stock model: Redis then holds nothing looser than MySQL).
func (n *nemesis) lowerLosingReply(ctx context.Context, f *fault, low int) (limitChange, string, error) {
	fw := n.p.eng.fw
	gw := f.n % nGateways
	pr := n.proc(fmt.Sprintf("gateway%d", gw))
	port, err := n.p.eng.redis.masterOf(ctx, f.sku)
	if err != nil {
		return limitChange{}, "", err
	}
	var before int
	if err := n.p.db.QueryRowContext(ctx, "SELECT max_per_customer FROM products WHERE sku = ?", f.sku).Scan(&before); err != nil {
		return limitChange{}, "", fmt.Errorf("read the limit before: %w", err)
	}
	id := fmt.Sprintf("f%d-limit-%s-%d", len(n.list()), pr.name, port)
	if err := fw.drop(id, pr.uid, port); err != nil {
		return limitChange{}, "", err
	}
	l := n.w.setLimit(f.sku, low, gw)
	dropped, derr := fw.dropped(id)
	if err := firstErr(derr, fw.heal(id)); err != nil {
		return l, "", err
	}
	if l.Status == http.StatusOK {
		return l, fmt.Sprintf(" (through %s cut from redis :%d, yet answered: %d packets dropped)", pr.name, port, dropped), nil
	}
	var held int
	if err := n.p.db.QueryRowContext(ctx, "SELECT max_per_customer FROM products WHERE sku = ?", f.sku).Scan(&held); err != nil {
		return l, "", fmt.Errorf("read the limit after: %w", err)
	}
	if held != before {
		return l, "", fmt.Errorf("a limit load whose Redis reply was lost (%s) left MySQL's limit %d, not the looser %d it had", l, held, before)
	}
	return l, fmt.Sprintf(" (through %s cut from redis :%d, %d packets dropped: MySQL kept limit %d)", pr.name, port, dropped, held), nil
}

// setLimit sets sku's purchase limit per customer through the admin API
// of gateway gw (the next one when a gateway refuses the connection: it is
// being restarted), keeping the stock the test keeps for the SKU, one
// load at a time, and records it twice: as a limit change, and as a
// restock to the same stock (a load may set the stock as well: check 1).
func (w *workload) setLimit(sku string, limit, gw int) limitChange {
	w.restockMu.Lock()
	defer w.restockMu.Unlock()
	w.mu.Lock()
	stock := w.stock[sku]
	w.mu.Unlock()
	var l limitChange
	for i := range len(w.p.urls) {
		g := (gw + i) % len(w.p.urls)
		l = limitChange{At: w.h.since(), SKU: sku, Limit: limit, Via: fmt.Sprintf("gateway%d admin API", g)}
		status, err := w.p.putStockLimit(context.Background(), g, sku, stock, limit)
		l.Done, l.Status = w.h.since(), status
		if err != nil {
			l.Err = err.Error()
		}
		if status != 0 || !strings.Contains(l.Err, syscall.ECONNREFUSED.Error()) {
			break
		}
	}
	w.h.noteRestock(restock{At: l.At, Done: l.Done, SKU: sku, Target: stock, Via: l.Via, Status: l.Status, Err: l.Err})
	w.h.noteLimit(l)
	return l
}

// replay is an operator replaying every dead letter through the admin API.
// A gateway that refuses the connection (it is being restarted) is
// skipped for the next one, as an operator would.
func (n *nemesis) replay(f *fault) error {
	var (
		gw   int
		resp *http.Response
		err  error
	)
	for i := range len(n.p.adminURLs) {
		gw = (f.n + i) % len(n.p.adminURLs)
		req, _ := http.NewRequest(http.MethodPost, n.p.adminURLs[gw]+"/v1/admin/dlq/replay", strings.NewReader(`{"all":true}`))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Surge-Operator", "faults")
		resp, err = (&http.Client{Timeout: 15 * time.Second}).Do(req)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("dlq replay: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("dlq replay via gateway%d: %d %s", gw, resp.StatusCode, shorten(string(body), 200))
	}
	f.target = fmt.Sprintf("gateway%d", gw)
	f.effect = "200 " + shorten(string(bytes.TrimSpace(body)), 160)
	return nil
}

// hammerFor sends orders of one customer for sku, each with a new key,
// one every pace, each on its own, until ctx ends; every answer is
// recorded and handed to seen. It returns once every request was answered.
func (w *workload) hammerFor(ctx context.Context, customer, sku string, pace time.Duration, seen func(attempt)) {
	var wg sync.WaitGroup
	for i := 0; ctx.Err() == nil; i++ {
		idx := w.h.newOp("hammer", customer, fmt.Sprintf("%s-%d", customer, i), sku, 1)
		wg.Go(func() {
			gw := i % len(w.p.urls)
			seen(w.h.place(context.Background(), w.client, w.p.urls[gw], gw, idx))
		})
		sleep(ctx, pace)
	}
	wg.Wait()
}

// lowestSKU is the SKU whose last sample showed the fewest units.
func (w *workload) lowestSKU() string {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	best, fewest := w.skus[0], -1
	for _, sku := range w.skus {
		s := w.h.samples[sku]
		if len(s) == 0 {
			continue
		}
		if a := s[len(s)-1].Avail; fewest < 0 || a < fewest {
			best, fewest = sku, a
		}
	}
	return best
}

// highestSKU is the SKU whose last sample showed the most units.
func (w *workload) highestSKU() string {
	best, most := w.skus[0], -1
	for _, sku := range w.skus {
		if a := w.lastAvail(sku); a > most {
			best, most = sku, a
		}
	}
	return best
}

// lastAvail is the units the last sample of sku showed, -1 without one.
func (w *workload) lastAvail(sku string) int {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	s := w.h.samples[sku]
	if len(s) == 0 {
		return -1
	}
	return s[len(s)-1].Avail
}

// restockOpsctl raises sku's stock by delta with `opsctl stock load`
// (MySQL and Redis directly, no gateway), one restock at a time.
func (w *workload) restockOpsctl(sku string, delta int) restock {
	w.restockMu.Lock()
	defer w.restockMu.Unlock()
	w.mu.Lock()
	target := w.stock[sku] + delta
	w.mu.Unlock()
	r := restock{At: w.h.since(), SKU: sku, Target: target, Via: "opsctl"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := w.p.command("opsctl", "stock", "load", sku, "--stock", strconv.Itoa(target))
	cmd.Env = append(cmd.Env, "SURGE_OPERATOR=faults")
	out, err := commandOutput(ctx, cmd)
	r.Done = w.h.since()
	switch {
	case err == nil:
		r.Status = http.StatusOK
		w.mu.Lock()
		w.stock[sku] = target
		w.mu.Unlock()
	case strings.Contains(out, "conflict"):
		r.Status, r.Err = http.StatusConflict, shorten(out, 160)
	default:
		r.Err = fmt.Sprintf("%v: %s", err, shorten(out, 160))
	}
	w.h.noteRestock(r)
	return r
}

// commandOutput runs cmd, killing it when ctx ends, and returns what it
// printed.
func commandOutput(ctx context.Context, cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return out.String(), ctx.Err()
	}
}
