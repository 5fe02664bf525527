package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"surge/pkg/admin"
	"surge/pkg/gateway"
	"surge/pkg/order"
	"surge/pkg/store"
)

type lookupData struct {
	Customer, Key, ID string
	Error             string
}

// orderLookup finds an order by id, or by customer and Idempotency-Key:
// the ids that pair names in the windows around now (order.IDFor), the
// first one any layer knows.
func (c *Console) orderLookup(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := lookupData{Customer: strings.TrimSpace(q.Get("customer")), Key: q.Get("key"), ID: strings.TrimSpace(q.Get("id"))}
	switch {
	case d.ID != "":
		http.Redirect(w, r, "/console/orders/"+url.PathEscape(d.ID), http.StatusSeeOther)
		return
	case d.Customer != "" || d.Key != "":
		id, err := c.findOrder(r.Context(), d.Customer, d.Key)
		if err == nil {
			http.Redirect(w, r, "/console/orders/"+url.PathEscape(id), http.StatusSeeOther)
			return
		}
		d.Error = err.Error()
	}
	c.render(w, http.StatusOK, "lookup.html", s, "Find an order", "orders", d)
}

func (c *Console) findOrder(ctx context.Context, customer, key string) (string, error) {
	if err := order.ValidateIdempotencyKey(key); err != nil {
		return "", err
	}
	if customer == "" {
		return "", order.Invalid("customer_id is required")
	}
	ttl := c.IdempotencyTTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	now := order.KeyWindow(customer, key, c.Now(), ttl)
	for _, id := range order.IDsFor(customer, key, now-2, 4) {
		if _, err := c.Status.Status(ctx, id); err == nil {
			return id, nil
		} else if !errors.Is(err, order.ErrNotFound) {
			return "", err
		}
	}
	return "", fmt.Errorf("no order of customer %q with key %q is known (MySQL, Redis): %w", customer, key, order.ErrNotFound)
}

// step is one stage of an order's path.
type step struct {
	What, Detail string
	At           string
}

type orderData struct {
	ID     string
	View   gateway.OrderView
	Row    *store.OrderRow
	State  string
	Parked []admin.Letter
	Audit  []store.ReplayEntry
	Path   []step
	Notes  []string
}

// order shows one order: its status as the public API answers it, its
// MySQL row and invoice, its state in Redis, and the path it took.
func (c *Console) order(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	id := r.PathValue("id")
	if err := order.ValidateID(id); err != nil {
		c.fail(w, s, http.StatusBadRequest, err)
		return
	}
	d := orderData{ID: id}
	v, err := c.Status.Status(ctx, id)
	if err != nil && !errors.Is(err, order.ErrNotFound) {
		d.Notes = append(d.Notes, "status: "+err.Error())
	}
	d.View = v
	if rows, err := c.Store.OrderRows(ctx, []string{id}); err != nil {
		d.Notes = append(d.Notes, "MySQL: "+err.Error())
	} else if row, ok := rows[id]; ok {
		d.Row = &row
		d.View.SKU, d.View.Qty = row.SKU, row.Qty
	}
	if d.View.SKU != "" {
		if d.State, err = c.States.State(ctx, d.View.SKU, id); err != nil {
			d.Notes = append(d.Notes, "Redis: "+err.Error())
		}
	}
	if letters, err := c.Letters.List(ctx); err != nil {
		d.Notes = append(d.Notes, "dead letters: "+err.Error())
	} else {
		for _, l := range letters {
			if l.OrderID == id {
				d.Parked = append(d.Parked, l)
				if d.View.SKU == "" {
					d.View.SKU = l.SKU
				}
			}
		}
	}
	d.Audit, _ = c.Store.Replays(ctx, store.AuditQuery{OrderID: id, Limit: auditPage})
	if d.View.Status == "" && d.Row == nil && len(d.Parked) == 0 && len(d.Audit) == 0 {
		c.fail(w, s, http.StatusNotFound, fmt.Errorf("order %s: %w (no layer knows it)", id, order.ErrNotFound))
		return
	}
	d.Path = path(d)
	c.render(w, http.StatusOK, "order.html", s, "Order "+id, "orders", d)
}

// path tells the order's story from what each layer kept: accepted
// (Redis), retried and parked (the dead letter's headers), replayed or
// discarded (the audit log), republished by the reconciler (its state
// R<n>), and how MySQL settled it.
func path(d orderData) []step {
	var out []step
	if d.Row != nil {
		out = append(out, step{What: "accepted", Detail: fmt.Sprintf("%d × %s for %s", d.Row.Qty, d.Row.SKU, d.Row.CustomerID)})
	} else if d.View.Status != "" {
		out = append(out, step{What: "accepted", Detail: fmt.Sprintf("%d × %s, reserved in Redis", d.View.Qty, d.View.SKU)})
	}
	for _, l := range d.Parked {
		if l.Attempts > 0 {
			out = append(out, step{What: "retry tiers", Detail: fmt.Sprintf("%d failed attempts, last: %s", l.Attempts, l.LastError), At: fmtTime(l.FirstFailure)})
		}
		out = append(out, step{What: "parked", Detail: fmt.Sprintf("dead letter %s, reason %s", l.ID, l.Reason), At: fmtTime(l.LastFailure)})
	}
	if len(d.Parked) == 0 && len(d.Audit) > 0 {
		// Parked earlier: the letter is gone, the audit log remembers it.
		first := d.Audit[len(d.Audit)-1]
		out = append(out, step{What: "parked", Detail: "dead letter " + first.DeadLetterID + " (left the dead queue since)"})
	}
	for i := len(d.Audit) - 1; i >= 0; i-- {
		a := d.Audit[i]
		out = append(out, step{What: a.Outcome, Detail: fmt.Sprintf("dead letter %s by %s", a.DeadLetterID, a.Actor), At: fmtTime(a.At)})
	}
	if strings.HasPrefix(d.State, "R") {
		out = append(out, step{What: "republished", Detail: "by the reconciler, " + strings.TrimPrefix(d.State, "R") + " time(s): it held a reservation past the grace period with nothing in MySQL"})
	}
	if d.Row != nil {
		switch d.Row.Status {
		case string(order.StatusInvoiced):
			out = append(out, step{What: "invoiced", Detail: fmt.Sprintf("invoice %d, %s", d.Row.InvoiceID, centsText(d.Row.AmountCents)), At: fmtTimeP(d.Row.InvoicedAt)})
		default:
			out = append(out, step{What: d.Row.Status, Detail: d.Row.Reason, At: fmtTime(d.Row.CreatedAt)})
		}
	}
	return out
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

func fmtTimeP(t *time.Time) string {
	if t == nil {
		return ""
	}
	return fmtTime(*t)
}

func centsText(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }
