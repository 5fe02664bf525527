package console

import (
	"fmt"
	"html/template"
	"strings"
	"sync"
	"time"
)

// trendSpan is how far back the board's sparklines reach.
const trendSpan = 5 * time.Minute

// trends keeps, for the last trendSpan, the units accepted (Redis: sold +
// reserved) and invoiced (MySQL: sold) per second across the board's SKUs,
// one point per board snapshot. A point compares each SKU with the
// previous snapshot, so a SKU that enters or leaves the board moves no
// rate. The ring fills while someone watches the board: the console reads
// nothing when nobody does.
type trends struct {
	mu     sync.Mutex
	points []trendPoint
	prev   map[string]skuCount
	prevAt time.Time
}

type trendPoint struct {
	At                 time.Time
	Accepted, Invoiced float64
}

type skuCount struct{ accepted, invoiced int }

// add records a snapshot of the board taken at at.
func (t *trends) add(at time.Time, rows []boardRow) {
	cur := make(map[string]skuCount, len(rows))
	for _, r := range rows {
		if r.Error == "" && r.Loaded {
			cur[r.SKU] = skuCount{r.RedisSold + r.RedisResv, r.MySQLSold}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.prev != nil && at.After(t.prevAt) {
		var acc, inv int
		for sku, c := range cur {
			if p, ok := t.prev[sku]; ok {
				acc += max(c.accepted-p.accepted, 0)
				inv += max(c.invoiced-p.invoiced, 0)
			}
		}
		dt := at.Sub(t.prevAt).Seconds()
		t.points = append(t.points, trendPoint{At: at, Accepted: float64(acc) / dt, Invoiced: float64(inv) / dt})
	}
	t.prev, t.prevAt = cur, at
	i := 0
	for i < len(t.points) && at.Sub(t.points[i].At) > trendSpan {
		i++
	}
	t.points = append(t.points[:0:0], t.points[i:]...)
}

// view draws the sparklines as of now.
func (t *trends) view(now time.Time) trendView {
	t.mu.Lock()
	pts := append([]trendPoint(nil), t.points...)
	t.mu.Unlock()
	acc, inv := make([]float64, len(pts)), make([]float64, len(pts))
	at := make([]time.Time, len(pts))
	for i, p := range pts {
		acc[i], inv[i], at[i] = p.Accepted, p.Invoiced, p.At
	}
	start := axisStart(now, at)
	return trendView{Accepted: spark(start, now, at, acc), Invoiced: spark(start, now, at, inv), Span: spanText(now.Sub(start))}
}

// trendMinAxis is the shortest time axis drawn: the first seconds of a
// watch are not stretched over the whole box.
const trendMinAxis = 30 * time.Second

// axisStart is where the time axis begins: trendSpan back, or at the
// oldest point when the ring holds less, and never less than trendMinAxis.
func axisStart(now time.Time, at []time.Time) time.Time {
	start := now.Add(-trendSpan)
	if len(at) > 0 && at[0].After(start) {
		start = at[0]
	}
	if floor := now.Add(-trendMinAxis); start.After(floor) {
		return floor
	}
	return start
}

func spanText(d time.Duration) string {
	if d >= 2*time.Minute {
		return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	}
	return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
}

// trendView is what the board shows (and its JSON carries) of the trends.
type trendView struct {
	Accepted sparkline `json:"accepted"`
	Invoiced sparkline `json:"invoiced"`
	Span     string    `json:"span"`
}

// sparkline is one series drawn in a sparkW x sparkH box: Points is the
// polyline's points attribute (numbers only), Last and Peak the newest
// and highest rates, in units per second.
type sparkline struct {
	Points  string  `json:"points"`
	Last    float64 `json:"last"`
	Peak    float64 `json:"peak"`
	Samples int     `json:"samples"`
}

const sparkW, sparkH = 300.0, 48.0

// spark draws rates at times at on a time axis from start to now, scaled
// to the series' peak (a flat line at the bottom when nothing moved).
func spark(start, now time.Time, at []time.Time, rates []float64) sparkline {
	s := sparkline{Samples: len(rates)}
	for _, r := range rates {
		s.Peak = max(s.Peak, r)
	}
	if len(rates) > 0 {
		s.Last = rates[len(rates)-1]
	}
	var b strings.Builder
	axis := now.Sub(start).Seconds()
	for i, r := range rates {
		x := min(max(at[i].Sub(start).Seconds()/axis, 0), 1) * sparkW
		y := sparkH - 2
		if s.Peak > 0 {
			y = sparkH - 2 - r/s.Peak*(sparkH-4)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	s.Points = b.String()
	return s
}

// svg is the sparkline as inline SVG: drawn on the server, no script.
func (s sparkline) SVG(class string) template.HTML {
	return template.HTML(fmt.Sprintf(`<svg class="spark %s" viewBox="0 0 %g %g" preserveAspectRatio="none" role="img" aria-label="units per second"><polyline points="%s"/></svg>`,
		template.HTMLEscapeString(class), sparkW, sparkH, template.HTMLEscapeString(s.Points)))
}
