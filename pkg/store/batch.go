package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"surge/pkg/order"
)

// BatchItem is one order of a batch with its fencing token (0: unfenced).
type BatchItem struct {
	Order order.Order
	Fence int64
}

// BatchResult is the outcome of one BatchItem. Err is set, and order.Processed
// empty, when that item alone was refused: invalid, stale fence
// (order.ErrStaleFence) or unknown SKU (order.ErrUnknownSKU); such an item
// wrote nothing.
type BatchResult struct {
	order.Processed
	Err error
}

// batchAttempts bounds the retries of a batch that lost a race with a
// concurrent twin of one of its orders (the retry sees that order up front).
const batchAttempts = 3

// ProcessBatch processes many orders in one transaction, with the outcome
// Process would give each of them in turn (but no InvoiceID for the orders
// it invoices itself): per SKU, orders are accepted in batch order while
// they fit in stock - sold (read FOR UPDATE) and within a purchase limit
// that could have admitted them (holding.refuses; the customer's invoiced
// orders read with a locking read), with one
// guarded UPDATE per SKU and multi-row INSERTs for orders and invoices.
// Orders already in MySQL, and the second occurrence of an order id inside
// the batch, are reported as Duplicate. When the same order carries
// different fences in one batch, the highest wins and the others are stale.
// The returned error is for the batch as a whole (nothing was written);
// results are in item order.
func (s *Store) ProcessBatch(ctx context.Context, items []BatchItem) ([]BatchResult, error) {
	for attempt := 1; ; attempt++ {
		out, err := s.processBatchOnce(ctx, items)
		if isDuplicateKey(err) && attempt < batchAttempts {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("process batch of %d orders: %w", len(items), err)
		}
		return out, nil
	}
}

// batch is the state of one attempt at a batch.
type batch struct {
	items []BatchItem
	out   []BatchResult
	// done marks items whose outcome is settled (Err, or Duplicate).
	done []bool
	// twinOf maps an item to the earlier item of the batch with the same
	// order id, -1 when it is the first.
	twinOf []int
}

func (s *Store) processBatchOnce(ctx context.Context, items []BatchItem) ([]BatchResult, error) {
	b := &batch{
		items:  items,
		out:    make([]BatchResult, len(items)),
		done:   make([]bool, len(items)),
		twinOf: make([]int, len(items)),
	}
	for i, it := range items {
		b.twinOf[i] = -1
		if err := validateOrder(it.Order); err != nil {
			b.settle(i, BatchResult{Err: err})
		}
	}
	if err := b.checkSKUs(ctx, s.db); err != nil {
		return nil, err
	}
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := b.fencesAndExisting(ctx, tx); err != nil {
			return err
		}
		b.findTwins()
		return b.place(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	b.copyTwins()
	return b.out, nil
}

func (b *batch) settle(i int, r BatchResult) {
	b.out[i] = r
	b.done[i] = true
}

// pending calls fn for every item whose outcome is still open.
func (b *batch) pending(fn func(i int, it BatchItem)) {
	for i, it := range b.items {
		if !b.done[i] {
			fn(i, it)
		}
	}
}

// checkSKUs settles the items whose SKU does not exist, before the
// transaction records any fence, so that they write nothing (as in
// Process). Products are never deleted, so a SKU found here is still there
// when the transaction locks it.
func (b *batch) checkSKUs(ctx context.Context, q sqlx.QueryerContext) error {
	var skus []string
	b.pending(func(_ int, it BatchItem) { skus = append(skus, it.Order.SKU) })
	if len(skus) == 0 {
		return nil
	}
	slices.Sort(skus)
	query, args, err := sqlx.In("SELECT sku FROM products WHERE sku IN (?)", slices.Compact(skus))
	if err != nil {
		return fmt.Errorf("build product lookup: %w", err)
	}
	var known []string
	if err := sqlx.SelectContext(ctx, q, &known, query, args...); err != nil {
		return fmt.Errorf("look up %d products: %w", len(skus), err)
	}
	exists := make(map[string]bool, len(known))
	for _, sku := range known {
		exists[sku] = true
	}
	b.pending(func(i int, it BatchItem) {
		if !exists[it.Order.SKU] {
			b.settle(i, BatchResult{Err: unknownSKU(it.Order)})
		}
	})
	return nil
}

// fencesAndExisting settles the stale items, then those whose order MySQL
// already has. When every open item is fenced (the worker's case) it
// takes two statements: the fence upsert, then one read of the recorded
// fences joined with the orders and invoices. That read needs no lock of
// its own: the upsert holds every fence row exclusively until commit, and
// the read is the transaction's first consistent read, so it sees the
// token each row holds now and no other transaction can change it before
// this one commits (see "Fencing a batch" in docs/ARCHITECTURE.md).
func (b *batch) fencesAndExisting(ctx context.Context, tx *sqlx.Tx) error {
	fences := make(map[string]int64)
	unfenced := false
	b.pending(func(_ int, it BatchItem) {
		if it.Fence <= 0 {
			unfenced = true
			return
		}
		fences[it.Order.ID] = max(fences[it.Order.ID], it.Fence)
	})
	if unfenced || len(fences) == 0 {
		if err := b.checkFences(ctx, tx); err != nil {
			return err
		}
		return b.findExisting(ctx, tx)
	}
	ids, err := raiseFences(ctx, tx, fences)
	if err != nil {
		return err
	}
	recs, err := lookupFenced(ctx, tx, ids)
	if err != nil {
		return err
	}
	b.pending(func(i int, it BatchItem) {
		rec := recs[it.Order.ID]
		switch {
		case rec.Found && rec.SKU != it.Order.SKU:
			// Another SKU's order under this id (a key used again after a
			// failover lost its record): whatever the tokens, this one
			// sells nothing and its reservation must be released. Its
			// lock was taken under its own SKU, so it did not exclude the
			// recorded order's holder, and its token may be the lower.
			// On one SKU the lock is shared: a lower token is stale.
			b.settle(i, BatchResult{Processed: rec.result()})
		case rec.Fence > it.Fence:
			b.settle(i, BatchResult{Err: staleFence(it.Order.ID, it.Fence, rec.Fence)})
		case rec.Found:
			b.settle(i, BatchResult{Processed: rec.result()})
		}
	})
	return nil
}

// checkFences records the fencing tokens and settles stale items.
func (b *batch) checkFences(ctx context.Context, tx *sqlx.Tx) error {
	fences := make(map[string]int64)
	b.pending(func(_ int, it BatchItem) {
		if it.Fence > 0 {
			fences[it.Order.ID] = max(fences[it.Order.ID], it.Fence)
		}
	})
	recorded, err := recordFences(ctx, tx, fences)
	if err != nil {
		return err
	}
	b.pending(func(i int, it BatchItem) {
		if it.Fence > 0 && recorded[it.Order.ID] > it.Fence {
			b.settle(i, BatchResult{Err: staleFence(it.Order.ID, it.Fence, recorded[it.Order.ID])})
		}
	})
	return nil
}

// findExisting settles the items whose order MySQL already has.
func (b *batch) findExisting(ctx context.Context, tx *sqlx.Tx) error {
	var ids []string
	b.pending(func(_ int, it BatchItem) { ids = append(ids, it.Order.ID) })
	slices.Sort(ids)
	existing, err := lookupOrders(ctx, tx, slices.Compact(ids))
	if err != nil {
		return err
	}
	b.pending(func(i int, it BatchItem) {
		if rec, ok := existing[it.Order.ID]; ok {
			b.settle(i, BatchResult{Processed: rec.result()})
		}
	})
	return nil
}

// findTwins marks later occurrences of an order id; copyTwins gives them
// the first occurrence's outcome once it is known.
func (b *batch) findTwins() {
	first := make(map[string]int)
	b.pending(func(i int, it BatchItem) {
		if j, ok := first[it.Order.ID]; ok {
			b.twinOf[i] = j
			b.done[i] = true
			return
		}
		first[it.Order.ID] = i
	})
}

func (b *batch) copyTwins() {
	for i, j := range b.twinOf {
		if j < 0 {
			continue
		}
		b.out[i] = b.out[j]
		if b.out[i].Err == nil {
			b.out[i].Duplicate = true
			if b.out[i].Recorded.ID == "" { // the twin was placed by this batch
				first := b.items[j].Order
				b.out[i].Recorded = order.Order{ID: first.ID, SKU: first.SKU, Qty: first.Qty, CustomerID: first.CustomerID}
			}
		}
	}
}
