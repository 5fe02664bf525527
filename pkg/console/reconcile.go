package console

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/store"
)

// repairRow is one reconcile_repairs row as the history shows it.
type repairRow struct {
	store.RepairEntry
	Found   admin.Found
	Changed admin.Changes
	By      string
}

type historyData struct {
	SKU    string
	Rows   []repairRow
	Next   int64
	Error  string
	Result *reconcileResult
}

func (c *Console) history(r *http.Request) historyData {
	q := r.URL.Query()
	d := historyData{SKU: strings.TrimSpace(q.Get("sku"))}
	if d.SKU == "" {
		d.SKU = strings.TrimSpace(r.PostFormValue("sku"))
	}
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	rows, err := c.Store.Repairs(r.Context(), store.AuditQuery{SKU: d.SKU, Before: before, Limit: auditPage})
	if err != nil {
		d.Error = err.Error()
	}
	for _, e := range rows {
		row := repairRow{RepairEntry: e, By: e.Actor}
		if row.By == "" {
			row.By = "schedule"
		}
		_ = json.Unmarshal(e.Found, &row.Found)
		_ = json.Unmarshal(e.Changed, &row.Changed)
		d.Rows = append(d.Rows, row)
	}
	if len(rows) == auditPage {
		d.Next = rows[len(rows)-1].ID
	}
	return d
}

func (c *Console) reconcileHistory(w http.ResponseWriter, r *http.Request, s *session) {
	c.render(w, http.StatusOK, "reconcile.html", s, "Reconcile", "reconcile", c.history(r))
}

// reconcileAll runs the reconciler on the SKU named in the form, or on
// every product: a dry run unless mode=run.
func (c *Console) reconcileAll(w http.ResponseWriter, r *http.Request, s *session) {
	var skus []string
	if sku := strings.TrimSpace(r.PostFormValue("sku")); sku != "" {
		if err := order.ValidateSKU(sku); err != nil {
			c.fail(w, s, http.StatusBadRequest, err)
			return
		}
		skus = []string{sku}
	}
	res := c.runReconcile(r.Context(), skus, r.PostFormValue("mode") != "run", s)
	d := c.history(r)
	d.Result = &res
	c.render(w, http.StatusOK, "reconcile.html", s, "Reconcile", "reconcile", d)
}
