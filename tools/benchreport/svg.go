package benchreport

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Tick is a labelled position on an axis.
type Tick struct {
	V     float64
	Label string
}

// Axis maps data values to a chart's width or height.
type Axis struct {
	Label    string
	Min, Max float64
	// Log spaces the axis logarithmically (Min must be > 0).
	Log   bool
	Ticks []Tick
}

// pos maps v to [0, 1] along the axis, clamped.
func (a Axis) pos(v float64) float64 {
	lo, hi := a.Min, a.Max
	if a.Log {
		v, lo, hi = math.Log10(math.Max(v, a.Min)), math.Log10(lo), math.Log10(hi)
	}
	if hi <= lo {
		return 0
	}
	return math.Min(math.Max((v-lo)/(hi-lo), 0), 1)
}

// Series is one line of a chart.
type Series struct {
	Name   string
	Color  string
	Points [][2]float64
}

// Chart is one panel: axes, lines and a legend.
type Chart struct {
	Title  string
	X, Y   Axis
	Series []Series
}

const (
	marginLeft   = 70.0
	marginRight  = 20.0
	marginTop    = 30.0
	marginBottom = 45.0
	legendWidth  = 330.0
)

// WriteSVG draws the charts stacked vertically, each width x panelHeight
// pixels.
func WriteSVG(w io.Writer, width, panelHeight float64, charts ...Chart) error {
	var b strings.Builder
	total := panelHeight * float64(len(charts))
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		width, total, width, total)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, c := range charts {
		c.draw(&b, 0, float64(i)*panelHeight, width, panelHeight)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (c Chart) draw(b *strings.Builder, x0, y0, width, height float64) {
	left, top := x0+marginLeft, y0+marginTop
	w, h := width-marginLeft-marginRight, height-marginTop-marginBottom
	px := func(v float64) float64 { return left + c.X.pos(v)*w }
	py := func(v float64) float64 { return top + h - c.Y.pos(v)*h }
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="14" font-weight="bold">%s</text>`+"\n", left, y0+18, esc(c.Title))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", left, top, w, h)
	for _, t := range c.X.Ticks {
		x := px(t.V)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, top, x, top+h)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, top+h+16, esc(t.Label))
	}
	for _, t := range c.Y.Ticks {
		y := py(t.V)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+w, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, esc(t.Label))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+w/2, top+h+36, esc(c.X.Label))
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		x0+16, top+h/2, esc(c.Y.Label))
	for i, s := range c.Series {
		if len(s.Points) == 0 {
			continue
		}
		pts := make([]string, len(s.Points))
		for j, p := range s.Points {
			pts[j] = fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1]))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), s.Color)
		// The legend sits in the top right corner, on a white box, where
		// rising lines rarely are.
		lx, ly := left+w-legendWidth, top+16+float64(i)*16
		if i == 0 {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="white" fill-opacity="0.85" stroke="#ccc"/>`+"\n",
				lx-6, top+4, legendWidth, 16*float64(len(c.Series))+6)
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n",
			lx, ly-4, lx+20, ly-4, s.Color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+26, ly, esc(s.Name))
	}
}

func esc(s string) string { return html.EscapeString(s) }

// logTicks returns 1-2-5 ticks per decade between lo and hi.
func logTicks(lo, hi float64, format func(float64) string) []Tick {
	var out []Tick
	for d := math.Floor(math.Log10(lo)); d <= math.Ceil(math.Log10(hi)); d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if v >= lo*0.999 && v <= hi*1.001 {
				out = append(out, Tick{V: v, Label: format(v)})
			}
		}
	}
	return out
}

// linearTicks returns about n round ticks between 0 and hi.
func linearTicks(hi float64, n int, format func(float64) string) []Tick {
	if hi <= 0 {
		return []Tick{{0, format(0)}}
	}
	raw := hi / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []Tick
	for v := 0.0; v <= hi*1.0001; v += step {
		out = append(out, Tick{V: v, Label: format(v)})
	}
	return out
}
