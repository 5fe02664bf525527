//go:build faults

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// op is one logical order: a customer, an Idempotency-Key and a body,
// sent once or retried with the same key. Every op but the hammer's has a
// customer of its own.
//
// The test does not derive order ids itself (the derivation is the
// gateway's business and may change): id is the one the answers named
// (202, or an outcome_unknown carrying it), else the one MySQL holds for
// the op's customer (resolveIDs); otherIDs are further ids named for the
// same key, a violation.
type op struct {
	kind     string // buyer, patient (retries), hammer, mopup
	customer string
	key      string
	sku      string
	qty      int
	id       string
	otherIDs []string
	attempts []int // indexes into history.attempts
}

// nameID notes an order id named for the op.
func (o *op) nameID(id string) {
	switch {
	case id == "" || id == o.id:
	case o.id == "":
		o.id = id
	default:
		for _, x := range o.otherIDs {
			if x == id {
				return
			}
		}
		o.otherIDs = append(o.otherIDs, id)
	}
}

// attempt is one HTTP request of an op and what came back.
type attempt struct {
	Op         int           `json:"op"`
	N          int           `json:"n"`
	Gateway    int           `json:"gw"`
	Sent       time.Duration `json:"sent"`
	Done       time.Duration `json:"done"`
	Status     int           `json:"status"` // 0: transport error
	Code       string        `json:"code,omitempty"`
	OrderID    string        `json:"order_id,omitempty"`
	RetryAfter string        `json:"retry_after,omitempty"`
	Err        string        `json:"err,omitempty"`
}

// outcome is what an answer says about the order.
type outcome int

const (
	accepted outcome = iota // 202: a promise to invoice
	refused                 // not taken: nothing of it may ever be invoiced
	unknown                 // transport error, outcome_unknown, anything else
)

func (a attempt) outcome() outcome {
	switch {
	case a.Status == http.StatusAccepted:
		return accepted
	case a.Status >= 400 && a.Status < 500: // 400, 404, 409, 413, 422, 429, ...: every 4xx says "not taken"
		return refused
	case a.Status == http.StatusServiceUnavailable && a.Code == "unavailable":
		return refused
	case a.Status == 0 && strings.Contains(a.Err, syscall.ECONNREFUSED.Error()):
		return refused // the connection was refused: nothing was sent
	}
	return unknown
}

// answer spells an answer for reports and counts: "202", "503
// unavailable", "transport error".
func (a attempt) answer() string {
	if a.Status == 0 {
		return "transport error"
	}
	if a.Code == "" {
		return fmt.Sprint(a.Status)
	}
	return fmt.Sprintf("%d %s", a.Status, a.Code)
}

// history records every op and attempt of a run, and the answers of the
// status polls.
type history struct {
	start time.Time

	mu       sync.Mutex
	ops      []*op
	attempts []attempt
	polls    map[string]map[string]bool // order id -> statuses seen by GET
	pollErrs map[string]int             // poll answers that were not 200, by answer
	restocks []restock
	limits   []limitChange       // the purchase limit loads the test sent
	samples  map[string][]sample // sku -> avail in Redis over time
	deaths   []death             // programs that exited, asked or not
}

// sample is Redis's avail of a SKU, read by a GET sent at At and answered
// at Done (the read happened in between).
type sample struct {
	At    time.Duration `json:"at"`
	Done  time.Duration `json:"done"`
	Avail int           `json:"avail"`
}

// restock is one stock change the test asked for (admin API or opsctl):
// Status 200 set the stock to Target, 409 changed nothing, anything else
// (0: no answer) may have set it or not.
type restock struct {
	At     time.Duration `json:"at"`
	Done   time.Duration `json:"done"`
	SKU    string        `json:"sku"`
	Target int           `json:"target"`
	Via    string        `json:"via"`
	Status int           `json:"status"`
	Err    string        `json:"err,omitempty"`
}

// limitChange is one purchase limit load the test sent (admin API): Status
// 200 set the SKU's limit per customer to Limit, 400 or 409 changed
// nothing, anything else (0: no answer) may have set it or not.
type limitChange struct {
	At     time.Duration `json:"at"`
	Done   time.Duration `json:"done"`
	SKU    string        `json:"sku"`
	Limit  int           `json:"limit"`
	Via    string        `json:"via"`
	Status int           `json:"status"`
	Err    string        `json:"err,omitempty"`
}

func (l limitChange) String() string {
	s := fmt.Sprintf("+%.1fs %s limit %d via %s: %d", l.At.Seconds(), l.SKU, l.Limit, l.Via, l.Status)
	if l.Err != "" {
		s += " " + l.Err
	}
	return s
}

func (r restock) String() string {
	s := fmt.Sprintf("+%.1fs %s to %d via %s: %d", r.At.Seconds(), r.SKU, r.Target, r.Via, r.Status)
	if r.Err != "" {
		s += " " + r.Err
	}
	return s
}

// death is a program that exited; Asked tells whether the test meant it
// (a kill, a SIGTERM, the stop at the end), AtStart that it exited with
// an error before it was up (an engine it could not reach at start) and
// was started again a second later, as a supervisor does.
type death struct {
	Name    string        `json:"name"`
	At      time.Duration `json:"at"`
	Asked   bool          `json:"asked"`
	AtStart bool          `json:"at_start,omitempty"`
	Exit    string        `json:"exit"`
}

func newHistory() *history {
	return &history{start: time.Now(), polls: map[string]map[string]bool{}, pollErrs: map[string]int{},
		samples: map[string][]sample{}}
}

func (h *history) since() time.Duration { return time.Since(h.start) }

// newOp registers an order about to be placed and returns its index.
func (h *history) newOp(kind, customer, key, sku string, qty int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, &op{kind: kind, customer: customer, key: key, sku: sku, qty: qty})
	return len(h.ops) - 1
}

func (h *history) op(i int) op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return *h.ops[i]
}

func (h *history) record(a attempt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.ops[a.Op]
	a.N = len(o.attempts)
	h.attempts = append(h.attempts, a)
	o.attempts = append(o.attempts, len(h.attempts)-1)
	o.nameID(a.OrderID)
}

// orderBody is the part of an answer the test reads: an accepted order's
// id, or an error's code (and the order id an outcome_unknown carries).
type orderBody struct {
	OrderID string `json:"order_id"`
	Error   struct {
		Code    string `json:"code"`
		OrderID string `json:"order_id"`
	} `json:"error"`
}

// place sends op i to gateway gw once and records the attempt.
func (h *history) place(ctx context.Context, c *http.Client, url string, gw, i int) attempt {
	o := h.op(i)
	body, _ := json.Marshal(map[string]any{"sku": o.sku, "qty": o.qty, "customer_id": o.customer})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/orders", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", o.key)
	a := attempt{Op: i, Gateway: gw, Sent: h.since()}
	resp, err := c.Do(req)
	if err != nil {
		a.Done, a.Err = h.since(), err.Error()
		h.record(a)
		return a
	}
	payload, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.Done, a.Status, a.RetryAfter = h.since(), resp.StatusCode, resp.Header.Get("Retry-After")
	if rerr != nil {
		a.Status, a.Err = 0, "reading the answer: "+rerr.Error()
	}
	var b orderBody
	_ = json.Unmarshal(payload, &b)
	a.Code, a.OrderID = b.Error.Code, b.OrderID
	if a.OrderID == "" {
		a.OrderID = b.Error.OrderID
	}
	h.record(a)
	return a
}

// acceptedIDs returns the ids of orders answered 202 so far.
func (h *history) acceptedIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for _, a := range h.attempts {
		if a.Status == http.StatusAccepted && a.OrderID != "" {
			ids = append(ids, a.OrderID)
		}
	}
	return ids
}

func (h *history) notePoll(id, answer string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		h.pollErrs[answer]++
		return
	}
	h.notePollLocked(id, answer)
}

// notePollLocked notes a status a poll saw; h.mu is held.
func (h *history) notePollLocked(id, status string) {
	if h.polls[id] == nil {
		h.polls[id] = map[string]bool{}
	}
	h.polls[id][status] = true
}

func (h *history) noteRestock(r restock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restocks = append(h.restocks, r)
}

func (h *history) noteLimit(l limitChange) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.limits = append(h.limits, l)
}

func (h *history) noteDeath(d death) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deaths = append(h.deaths, d)
}

func (h *history) noteSample(sku string, s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples[sku] = append(h.samples[sku], s)
}
