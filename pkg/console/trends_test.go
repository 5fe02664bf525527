package console

import (
	"strings"
	"testing"
	"time"
)

// TestTrends: each point is the units per second since the previous
// snapshot, counted per SKU, so a SKU entering the board moves nothing;
// points older than the span are dropped; the sparkline spans the box.
func TestTrends(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)
	row := func(sku string, accepted, invoiced int) boardRow {
		return boardRow{SKU: sku, Loaded: true, RedisSold: accepted, MySQLSold: invoiced}
	}
	var tr trends
	tr.add(t0, []boardRow{row("a", 0, 0)})
	tr.add(t0.Add(2*time.Second), []boardRow{row("a", 20, 10), row("new", 500, 500)})
	tr.add(t0.Add(3*time.Second), []boardRow{row("a", 20, 20), row("new", 505, 500), {SKU: "broken", Error: "x"}})
	v := tr.view(t0.Add(3 * time.Second))
	if v.Accepted.Samples != 2 || v.Accepted.Peak != 10 || v.Accepted.Last != 5 {
		t.Errorf("accepted = %+v, want 2 points, peak 10/s (20 in 2 s), last 5/s (the new SKU's 5 only)", v.Accepted)
	}
	if v.Invoiced.Peak != 10 || v.Invoiced.Last != 10 {
		t.Errorf("invoiced = %+v, want 5/s then 10/s", v.Invoiced)
	}
	// 3 s of points on the 30 s minimum axis: the newest at the right
	// edge at half height (5/s of 10/s), the peak a second before, 10 px
	// left, at the top.
	if pts := strings.Fields(v.Accepted.Points); len(pts) != 2 || pts[1] != "300.0,24.0" || pts[0] != "290.0,2.0" || v.Span != "30 s" {
		t.Errorf("points %q over %s: want 290.0,2.0 300.0,24.0 over 30 s", v.Accepted.Points, v.Span)
	}
	if v := tr.view(t0.Add(3 * time.Minute)); v.Span != "3 min" {
		t.Errorf("span after 3 min: %q", v.Span)
	}
	tr.add(t0.Add(trendSpan+4*time.Second), []boardRow{row("a", 20, 20)})
	if v := tr.view(t0.Add(trendSpan + 4*time.Second)); v.Accepted.Samples != 1 {
		t.Errorf("after %v: %d points, want the old ones dropped", trendSpan, v.Accepted.Samples)
	}
	if svg := string(v.Accepted.SVG("accepted")); !strings.Contains(svg, `<polyline points="`+v.Accepted.Points+`"/>`) {
		t.Errorf("svg %s", svg)
	}
}
