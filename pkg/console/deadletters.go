package console

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"surge/pkg/admin"
	"surge/pkg/queue"
	"surge/pkg/store"
)

// letterPage is how many letters a page of the list shows; auditPage how
// many audit rows.
const (
	letterPage = 25
	auditPage  = 20
)

// letterFilter is the list's query: reason, SKU, a time range on the last
// failure, and the page.
type letterFilter struct {
	Reason, SKU, Since, Until string
	Discarded                 bool
	Page                      int
	AuditBefore               int64
}

func parseFilter(q url.Values) letterFilter {
	f := letterFilter{Reason: q.Get("reason"), SKU: strings.TrimSpace(q.Get("sku")),
		Since: q.Get("since"), Until: q.Get("until"), Discarded: q.Get("view") == "discarded"}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	f.Page = max(f.Page, 1)
	f.AuditBefore, _ = strconv.ParseInt(q.Get("audit_before"), 10, 64)
	return f
}

// query is the filter as a query string, for the pager's links.
func (f letterFilter) query(page int) string {
	v := url.Values{}
	for k, s := range map[string]string{"reason": f.Reason, "sku": f.SKU, "since": f.Since, "until": f.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.Discarded {
		v.Set("view", "discarded")
	}
	v.Set("page", strconv.Itoa(page))
	return v.Encode()
}

// match applies the filter; since and until are datetime-local values
// (UTC) or RFC 3339.
func (f letterFilter) match(l admin.Letter, now time.Time) bool {
	if f.Reason != "" && l.Reason != f.Reason {
		return false
	}
	if f.SKU != "" && !strings.Contains(l.SKU, f.SKU) {
		return false
	}
	if t, ok := parseWhen(f.Since, now); ok && l.LastFailure.Before(t) {
		return false
	}
	if t, ok := parseWhen(f.Until, now); ok && l.LastFailure.After(t) {
		return false
	}
	return true
}

func parseWhen(s string, now time.Time) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, true
		}
	}
	t, err := admin.ParseSince(s, now)
	return t, err == nil
}

type letterRow struct {
	admin.Letter
	DiscardedAt string
}

type lettersData struct {
	Filter      letterFilter
	Reasons     []string
	Letters     []letterRow
	Total       int
	Page, Pages int
	PrevQuery   string
	NextQuery   string
	Error       string
	Audit       []store.ReplayEntry
	AuditNext   int64
	AuditError  string
}

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, s *session) {
	f := parseFilter(r.URL.Query())
	d := lettersData{Filter: f}
	all, err := c.letters(r, f.Discarded)
	if err != nil {
		d.Error = err.Error()
	}
	reasons := map[string]bool{}
	var matched []letterRow
	for _, l := range all {
		reasons[l.Reason] = true
		if f.match(l.Letter, c.Now()) {
			matched = append(matched, l)
		}
	}
	for k := range reasons {
		d.Reasons = append(d.Reasons, k)
	}
	slices.Sort(d.Reasons)
	d.Total = len(matched)
	d.Pages = max((d.Total+letterPage-1)/letterPage, 1)
	d.Page = min(f.Page, d.Pages)
	lo := (d.Page - 1) * letterPage
	d.Letters = matched[lo:min(lo+letterPage, d.Total)]
	if d.Page > 1 {
		d.PrevQuery = f.query(d.Page - 1)
	}
	if d.Page < d.Pages {
		d.NextQuery = f.query(d.Page + 1)
	}
	if d.Audit, err = c.Store.Replays(r.Context(), store.AuditQuery{Before: f.AuditBefore, Limit: auditPage}); err != nil {
		d.AuditError = err.Error()
	} else if len(d.Audit) == auditPage {
		d.AuditNext = d.Audit[len(d.Audit)-1].ID
	}
	c.render(w, http.StatusOK, "deadletters.html", s, "Dead letters", "dlq", d)
}

// letters lists the parked letters, or the kept copies of discarded ones.
func (c *Console) letters(r *http.Request, discarded bool) ([]letterRow, error) {
	if !discarded {
		ls, err := c.Letters.List(r.Context())
		out := make([]letterRow, len(ls))
		for i, l := range ls {
			out[i] = letterRow{Letter: l}
		}
		return out, err
	}
	ds, err := c.Letters.Discarded(r.Context())
	out := make([]letterRow, len(ds))
	for i, d := range ds {
		out[i] = letterRow{Letter: d.Letter, DiscardedAt: headerTime(d.Headers, queue.HeaderDiscardedAt)}
	}
	return out, err
}

// headerTime shows a time header (RFC 3339) the way the pages show times.
func headerTime(h map[string]any, k string) string {
	s, _ := h[k].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

type letterData struct {
	Letter    admin.LetterDetail
	Discarded bool
	Headers   []headerRow
	Body      string
	Audit     []store.ReplayEntry
}

type headerRow struct{ Name, Value string }

// deadLetter shows one letter, parked or kept after a discard, with its
// headers, body and audit rows.
func (c *Console) deadLetter(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	d := letterData{}
	l, err := c.Letters.Show(r.Context(), id)
	if err != nil && statusOf(err) == http.StatusNotFound {
		if ds, derr := c.Letters.Discarded(r.Context()); derr == nil {
			for _, k := range ds {
				if k.ID == id {
					l, err, d.Discarded = k, nil, true
				}
			}
		}
	}
	if err != nil {
		c.fail(w, s, statusOf(err), err)
		return
	}
	d.Letter = l
	for _, k := range slices.Sorted(maps.Keys(l.Headers)) {
		v, _ := json.Marshal(l.Headers[k])
		if str, ok := l.Headers[k].(string); ok {
			v = []byte(str)
		}
		d.Headers = append(d.Headers, headerRow{k, string(v)})
	}
	if len(l.Body) > 0 {
		pretty, _ := json.MarshalIndent(l.Body, "", "  ")
		d.Body = string(pretty)
	} else {
		d.Body = l.BodyText
	}
	if l.OrderID != "" {
		d.Audit, _ = c.Store.Replays(r.Context(), store.AuditQuery{OrderID: l.OrderID, Limit: auditPage})
	}
	c.render(w, http.StatusOK, "deadletter.html", s, "Dead letter "+id, "dlq", d)
}

// actionData is a replay, discard or restore: the preview before the
// confirmation (Confirm true), or the report of what was done.
type actionData struct {
	Action  string
	IDs     []string
	Confirm bool
	Report  admin.LetterReport
	Letters []admin.Letter
	Error   string
}

func formIDs(r *http.Request) []string {
	var ids []string
	for _, id := range r.PostForm["id"] {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// replay dry-runs the replay of the selected letters and asks for
// confirmation; with mode=run it replays them.
func (c *Console) replay(w http.ResponseWriter, r *http.Request, s *session) {
	ids := formIDs(r)
	if len(ids) == 0 {
		c.fail(w, s, http.StatusBadRequest, errors.New("select the dead letters to replay"))
		return
	}
	run := r.PostFormValue("mode") == "run"
	rep, err := c.Letters.Replay(r.Context(), admin.ReplayRequest{IDs: ids, DryRun: !run, Actor: s.Operator})
	d := actionData{Action: "replay", IDs: ids, Confirm: !run, Report: rep}
	if err != nil {
		d.Error, d.Confirm = err.Error(), false
	}
	c.Log.Info("console: replay", "operator", s.Operator, "ids", ids, "dry_run", !run, "err", err)
	c.render(w, http.StatusOK, "action.html", s, "Replay dead letters", "dlq", d)
}

// discard shows what would be discarded and asks for confirmation; with
// mode=run it discards (a copy is kept, see restore).
func (c *Console) discard(w http.ResponseWriter, r *http.Request, s *session) {
	ids := formIDs(r)
	if len(ids) == 0 {
		c.fail(w, s, http.StatusBadRequest, errors.New("select the dead letters to discard"))
		return
	}
	d := actionData{Action: "discard", IDs: ids}
	if r.PostFormValue("mode") != "run" {
		all, err := c.Letters.List(r.Context())
		if err != nil {
			c.fail(w, s, statusOf(err), err)
			return
		}
		for _, l := range all {
			if slices.Contains(ids, l.ID) {
				d.Letters = append(d.Letters, l)
			}
		}
		d.Confirm = true
		c.render(w, http.StatusOK, "action.html", s, "Discard dead letters", "dlq", d)
		return
	}
	rep, err := c.Letters.Discard(r.Context(), ids, s.Operator)
	d.Report = rep
	if err != nil {
		d.Error = err.Error()
	}
	c.Log.Info("console: discard", "operator", s.Operator, "ids", ids, "err", err)
	c.render(w, http.StatusOK, "action.html", s, "Discard dead letters", "dlq", d)
}

// restore parks discarded letters again.
func (c *Console) restore(w http.ResponseWriter, r *http.Request, s *session) {
	ids := formIDs(r)
	if len(ids) == 0 {
		c.fail(w, s, http.StatusBadRequest, errors.New("select the discarded letters to restore"))
		return
	}
	rep, err := c.Letters.Restore(r.Context(), ids, s.Operator)
	d := actionData{Action: "restore", IDs: ids, Report: rep}
	if err != nil {
		d.Error = err.Error()
	}
	c.Log.Info("console: restore", "operator", s.Operator, "ids", ids, "err", err)
	c.render(w, http.StatusOK, "action.html", s, "Restore dead letters", "dlq", d)
}
