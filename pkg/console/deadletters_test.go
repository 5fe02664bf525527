package console

import (
	"net/url"
	"testing"
	"time"

	"surge/pkg/admin"
)

// TestLetterFilter: the list's filter by reason, SKU and last-failure time
// (datetime-local in UTC, RFC 3339 or a duration back from now), and its
// pager links keep the filter.
func TestLetterFilter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	l := admin.Letter{Reason: "unknown_sku", SKU: "tshirt-42", LastFailure: now.Add(-30 * time.Minute)}
	for q, want := range map[string]bool{
		"":                           true,
		"reason=unknown_sku":         true,
		"reason=malformed":           false,
		"sku=shirt":                  true,
		"sku=mug":                    false,
		"since=1h":                   true,
		"since=10m":                  false,
		"since=2026-12-02T11:00":     true,
		"until=2026-12-02T11:00":     false,
		"until=2026-12-02T11:45:00":  true,
		"since=2026-12-02T11:31:00Z": false,
	} {
		v, _ := url.ParseQuery(q)
		if got := parseFilter(v).match(l, now); got != want {
			t.Errorf("filter %q matches = %v, want %v", q, got, want)
		}
	}
	f := parseFilter(url.Values{"reason": {"malformed"}, "view": {"discarded"}, "page": {"0"}})
	if f.Page != 1 {
		t.Errorf("page 0 read as %d, want 1", f.Page)
	}
	back, _ := url.ParseQuery(f.query(3))
	if g := parseFilter(back); g.Reason != "malformed" || !g.Discarded || g.Page != 3 {
		t.Errorf("pager link %q reads back as %+v", f.query(3), g)
	}
}
