//go:build faults

package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// runInfo is what the checker needs of a run besides the history and the
// end state: its seed, SKUs, the stock the test loaded first, which SKUs
// the mop-up bought out, and the faults dealt.
type runInfo struct {
	Seed   int64           `json:"seed"`
	SKUs   []string        `json:"skus"`
	Loaded map[string]int  `json:"loaded"`
	Limits map[string]int  `json:"limits,omitempty"` // purchase limit per customer, per SKU that has one
	Mopped map[string]bool `json:"mopped"`
	Faults []faultRecord   `json:"faults"`
	Min    map[string]int  `json:"min,omitempty"` // a check's minimum samples; checkMinimums when absent
	// Deck are the fault kinds the run was to deal, each at least once.
	Deck []faultKind `json:"deck,omitempty"`
	// Reconciles are the exit codes of the run's `reconciler once`.
	Reconciles []int `json:"reconciles,omitempty"`
}

// faultRecord is a fault as the history keeps it.
type faultRecord struct {
	Kind   faultKind     `json:"kind"`
	Target string        `json:"target"`
	Start  time.Duration `json:"start"`
	End    time.Duration `json:"end"`
	Err    string        `json:"err,omitempty"`
	Effect string        `json:"effect"` // what showed it took effect; "" when nothing did
	// SKUs are, for a fault on a Redis master, the SKUs it served.
	SKUs []string `json:"skus,omitempty"`
}

// line is one JSON line of a saved history; T says which field is set.
type line struct {
	T       string         `json:"t"`
	Run     *runInfo       `json:"run,omitempty"`
	Op      *opRecord      `json:"op,omitempty"`
	Poll    *pollRecord    `json:"poll,omitempty"`
	PollErr map[string]int `json:"poll_errors,omitempty"`
	Restock *restock       `json:"restock,omitempty"`
	Limit   *limitChange   `json:"limit,omitempty"`
	SKU     string         `json:"sku,omitempty"`
	Sample  *sample        `json:"sample,omitempty"`
	Death   *death         `json:"death,omitempty"`
	SKUEnd  *skuRecord     `json:"sku_end,omitempty"`
	Order   *orderRecord   `json:"order_end,omitempty"`
}

type opRecord struct {
	Kind     string    `json:"kind"`
	Customer string    `json:"customer"`
	Key      string    `json:"key"`
	SKU      string    `json:"sku"`
	Qty      int       `json:"qty"`
	ID       string    `json:"id,omitempty"`
	OtherIDs []string  `json:"other_ids,omitempty"`
	Attempts []attempt `json:"attempts"`
}

type pollRecord struct {
	ID   string   `json:"id"`
	Seen []string `json:"seen"`
}

type skuRecord struct {
	SKU        string         `json:"sku"`
	MySQLStock int            `json:"mysql_stock"`
	MySQLSold  int            `json:"mysql_sold"`
	InvQty     int            `json:"inv_qty"`
	Invoices   int            `json:"invoices"`
	RedisErr   string         `json:"redis_err,omitempty"`
	RStock     int            `json:"redis_stock"`
	RAvail     int            `json:"redis_avail"`
	RSold      int            `json:"redis_sold"`
	Resv       map[string]int `json:"resv,omitempty"`
}

type orderRecord struct {
	ID       string `json:"id"`
	Row      bool   `json:"row"`
	SKU      string `json:"sku,omitempty"`
	Customer string `json:"customer,omitempty"`
	Status   string `json:"status,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Qty      int    `json:"qty,omitempty"`
	Invoices int    `json:"invoices,omitempty"`
	InvQty   int    `json:"inv_qty,omitempty"`
	State    string `json:"state,omitempty"`
	Resv     int    `json:"resv,omitempty"`
	Dead     string `json:"dead,omitempty"`
}

// saveRun writes the run, its whole history and its end state as JSON
// lines to path: what TestReplayHistory reads back.
func saveRun(path string, ri *runInfo, h *history, e *endState) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, l := range runLines(ri, h, e) {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func runLines(ri *runInfo, h *history, e *endState) []line {
	h.mu.Lock()
	defer h.mu.Unlock()
	ls := []line{{T: "run", Run: ri}}
	for _, o := range h.ops {
		r := &opRecord{Kind: o.kind, Customer: o.customer, Key: o.key, SKU: o.sku, Qty: o.qty, ID: o.id, OtherIDs: o.otherIDs}
		for _, ai := range o.attempts {
			r.Attempts = append(r.Attempts, h.attempts[ai])
		}
		ls = append(ls, line{T: "op", Op: r})
	}
	for _, id := range sortedKeys(h.polls) {
		ls = append(ls, line{T: "poll", Poll: &pollRecord{ID: id, Seen: sortedKeys(h.polls[id])}})
	}
	ls = append(ls, line{T: "poll_errors", PollErr: h.pollErrs})
	for i := range h.restocks {
		ls = append(ls, line{T: "restock", Restock: &h.restocks[i]})
	}
	for i := range h.limits {
		ls = append(ls, line{T: "limit", Limit: &h.limits[i]})
	}
	for _, sku := range sortedKeys(h.samples) {
		for i := range h.samples[sku] {
			ls = append(ls, line{T: "sample", SKU: sku, Sample: &h.samples[sku][i]})
		}
	}
	for i := range h.deaths {
		ls = append(ls, line{T: "death", Death: &h.deaths[i]})
	}
	if e == nil {
		return ls
	}
	for _, sku := range sortedKeys(e.skus) {
		ls = append(ls, line{T: "sku_end", SKUEnd: skuToRecord(sku, e.skus[sku])})
	}
	for _, id := range sortedKeys(e.orders) {
		ls = append(ls, line{T: "order_end", Order: orderToRecord(id, e.orders[id])})
	}
	return ls
}

// loadRun reads what saveRun wrote.
func loadRun(path string) (*runInfo, *history, *endState, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	ri := &runInfo{}
	h := newHistory()
	e := &endState{skus: map[string]*skuEnd{}, orders: map[string]*orderEnd{}, byCustomer: map[string][]string{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, nil, nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if err := addLine(l, ri, h, e); err != nil {
			return nil, nil, nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return ri, h, e, sc.Err()
}

func addLine(l line, ri *runInfo, h *history, e *endState) error {
	switch {
	case l.T == "run" && l.Run != nil:
		*ri = *l.Run
	case l.T == "op" && l.Op != nil:
		o := &op{kind: l.Op.Kind, customer: l.Op.Customer, key: l.Op.Key, sku: l.Op.SKU, qty: l.Op.Qty,
			id: l.Op.ID, otherIDs: l.Op.OtherIDs}
		h.ops = append(h.ops, o)
		for _, a := range l.Op.Attempts {
			a.Op = len(h.ops) - 1
			h.attempts = append(h.attempts, a)
			o.attempts = append(o.attempts, len(h.attempts)-1)
		}
		if len(o.attempts) == 0 {
			return fmt.Errorf("op of %s with no attempt", o.customer)
		}
	case l.T == "poll" && l.Poll != nil:
		for _, s := range l.Poll.Seen {
			h.notePollLocked(l.Poll.ID, s)
		}
	case l.T == "poll_errors":
		for k, n := range l.PollErr {
			h.pollErrs[k] += n
		}
	case l.T == "restock" && l.Restock != nil:
		h.restocks = append(h.restocks, *l.Restock)
	case l.T == "limit" && l.Limit != nil:
		h.limits = append(h.limits, *l.Limit)
	case l.T == "sample" && l.Sample != nil:
		h.samples[l.SKU] = append(h.samples[l.SKU], *l.Sample)
	case l.T == "death" && l.Death != nil:
		h.deaths = append(h.deaths, *l.Death)
	case l.T == "sku_end" && l.SKUEnd != nil:
		e.skus[l.SKUEnd.SKU] = recordToSKU(l.SKUEnd)
	case l.T == "order_end" && l.Order != nil:
		o := recordToOrder(l.Order)
		e.orders[l.Order.ID] = o
		if o.row {
			e.byCustomer[o.customer] = append(e.byCustomer[o.customer], l.Order.ID)
		}
	default:
		return fmt.Errorf("unknown line %q", l.T)
	}
	return nil
}

func skuToRecord(sku string, s *skuEnd) *skuRecord {
	return &skuRecord{SKU: sku, MySQLStock: s.mysqlStock, MySQLSold: s.mysqlSold, InvQty: s.invQty,
		Invoices: s.invoices, RedisErr: s.redisErr, RStock: s.rStock, RAvail: s.rAvail, RSold: s.rSold, Resv: s.resv}
}

func recordToSKU(r *skuRecord) *skuEnd {
	s := &skuEnd{mysqlStock: r.MySQLStock, mysqlSold: r.MySQLSold, invQty: r.InvQty, invoices: r.Invoices,
		redisErr: r.RedisErr, rStock: r.RStock, rAvail: r.RAvail, rSold: r.RSold, resv: r.Resv}
	if s.resv == nil {
		s.resv = map[string]int{}
	}
	return s
}

func orderToRecord(id string, o *orderEnd) *orderRecord {
	return &orderRecord{ID: id, Row: o.row, SKU: o.sku, Customer: o.customer, Status: o.status, Reason: o.reason,
		Qty: o.qty, Invoices: o.invoices, InvQty: o.invQty, State: o.state, Resv: o.resv, Dead: o.dead}
}

func recordToOrder(r *orderRecord) *orderEnd {
	return &orderEnd{row: r.Row, sku: r.SKU, customer: r.Customer, status: r.Status, reason: r.Reason, qty: r.Qty,
		invoices: r.Invoices, invQty: r.InvQty, state: r.State, resv: r.Resv, dead: r.Dead}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// failedDir is where a failing run keeps its history: the directory
// SURGE_FAULTS_FAILED_DIR names, else /tmp/surge-faults-failed, then the
// seed.
func failedDir(seed int64) string {
	root := os.Getenv("SURGE_FAULTS_FAILED_DIR")
	if root == "" {
		root = filepath.Join(os.TempDir(), "surge-faults-failed")
	}
	return filepath.Join(root, strconv.FormatInt(seed, 10))
}
