package admin

import (
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/budget"
)

// A chart is drawn on the server as SVG with real axes: dollar ticks on y,
// one labelled slot per day on x, a legend, and each bar's figure in its
// tooltip. No script and no library: the page must read without
// JavaScript and the binary carries no assets.

// series is one stacked part of a bar chart, or one line: a value (µ$) per
// slot; a line skips slots past its Len.
type series struct {
	Name, Color string
	Values      []int64
	Dashed      bool
	Len         int // lines: slots drawn (0: all)
}

// chart is a bar chart of stacked series over labelled slots, with lines
// (cumulative spend, a ceiling, a forecast) drawn over it.
type chart struct {
	ID, Title string
	Labels    []string // one per slot, shown under it
	Tips      []string // one per slot, the date in each bar's tooltip
	Bars      []series
	Lines     []series
}

// palette colours series in order; the last is "other".
var palette = []string{"#4a7bd0", "#e0803a", "#3aa676", "#b05cc8", "#c9a227", "#d04a6a", "#4ab3c4", "#8c8c8c"}

const (
	chartW, chartH           = 1000, 260
	padLeft, padRight, padTB = 78, 16, 24
)

// SVG draws c.
func (c chart) SVG() template.HTML {
	top := int64(0)
	for i := range c.Labels {
		var stack int64
		for _, s := range c.Bars {
			stack += s.Values[i]
		}
		top = max(top, stack)
	}
	for _, l := range c.Lines {
		for _, v := range l.Values {
			top = max(top, v)
		}
	}
	step := niceStep(top)
	top = max(step, (top+step-1)/step*step)
	plotW, plotH := chartW-padLeft-padRight, chartH-2*padTB-20
	y := func(v int64) float64 { return float64(padTB) + float64(plotH)*(1-float64(v)/float64(top)) }
	slot := float64(plotW) / float64(max(1, len(c.Labels)))
	x := func(i int) float64 { return float64(padLeft) + slot*float64(i) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		c.ID, chartW, chartH, chartW, chartH, html.EscapeString(c.Title))
	for v := int64(0); v <= top; v += step {
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/><text class="tick y" x="%d" y="%.1f" text-anchor="end" data-usd-micros="%d">%s</text>`,
			padLeft, chartW-padRight, y(v), y(v), padLeft-6, y(v)+4, v, tick(v))
	}
	for i, label := range c.Labels {
		fmt.Fprintf(&b, `<text class="tick x" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(i)+slot/2, chartH-padTB-2, html.EscapeString(label))
		base := int64(0)
		for _, s := range c.Bars {
			v := s.Values[i]
			if v == 0 {
				continue
			}
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" data-series="%s" data-usd-micros="%d"><title>%s · %s: %s</title></rect>`,
				x(i)+slot*0.15, y(base+v), slot*0.7, y(base)-y(base+v), s.Color, html.EscapeString(s.Name), v,
				html.EscapeString(c.Tips[i]), html.EscapeString(s.Name), budget.Money(v).Dollars())
			base += v
		}
	}
	for _, l := range c.Lines {
		n := len(l.Values)
		if l.Len > 0 {
			n = min(n, l.Len)
		}
		pts := make([]string, 0, n)
		for i := range n {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i)+slot/2, y(l.Values[i])))
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline class="line" fill="none" stroke="%s" stroke-width="2"%s points="%s" data-series="%s"><title>%s</title></polyline>`,
			l.Color, dash, strings.Join(pts, " "), html.EscapeString(l.Name), html.EscapeString(l.Name))
		if !l.Dashed && l.Len > 0 {
			// The measured points, each with its figure.
			for i := range n {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s · %s: %s</title></circle>`,
					x(i)+slot/2, y(l.Values[i]), l.Color, html.EscapeString(c.Tips[i]), html.EscapeString(l.Name), budget.Money(l.Values[i]).Cents())
			}
		}
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/><line class="axis" x1="%d" x2="%d" y1="%d" y2="%.1f"/>`,
		padLeft, chartW-padRight, y(0), y(0), padLeft, padLeft, padTB, y(0))
	fmt.Fprintf(&b, `<text class="title" x="%d" y="%d">%s</text></svg>`, padLeft, padTB-8, html.EscapeString(c.Title))
	b.WriteString(`<p class="legend">`)
	for _, s := range append(append([]series{}, c.Bars...), c.Lines...) {
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s</span>`, s.Color, html.EscapeString(s.Name))
	}
	b.WriteString(`</p>`)
	c.table(&b)
	return template.HTML(b.String()) //nolint:gosec // every text above is escaped
}

// table writes the chart's figures as a data table behind it, for a
// screen reader and for copying: a row per slot (day), a column per series.
func (c chart) table(b *strings.Builder) {
	all := append(append([]series{}, c.Bars...), c.Lines...)
	fmt.Fprintf(b, `<details class="chart-data"><summary>%s: the figures</summary><table id="%s-data"><caption>%s</caption><tr><th scope="col">day</th>`,
		html.EscapeString(c.Title), c.ID, html.EscapeString(c.Title))
	for _, s := range all {
		fmt.Fprintf(b, `<th scope="col" class="num">%s</th>`, html.EscapeString(s.Name))
	}
	b.WriteString(`</tr>`)
	for i := range c.Labels {
		fmt.Fprintf(b, `<tr><th scope="row">%s</th>`, html.EscapeString(c.Tips[i]))
		for _, s := range all {
			n := len(s.Values)
			if s.Len > 0 {
				n = min(n, s.Len)
			}
			if i < n {
				fmt.Fprintf(b, `<td class="num">%s</td>`, budget.Money(s.Values[i]).Cents())
			} else {
				b.WriteString(`<td class="num"></td>`)
			}
		}
		b.WriteString(`</tr>`)
	}
	b.WriteString(`</table></details>`)
}

// niceStep is a tick step of 1, 2 or 5 × 10^k µ$ (at least a cent) giving
// about five ticks up to top.
func niceStep(top int64) int64 {
	step := int64(10_000) // one cent
	for top/step > 5 {
		switch s := strconv.FormatInt(step, 10); s[0] {
		case '1', '5':
			step *= 2
		case '2':
			step = step / 2 * 5
		}
	}
	return step
}

// tick is an axis label: whole dollars where it is whole ("$1,200"),
// cents otherwise.
func tick(v int64) string {
	m := budget.Money(v)
	if m%budget.Dollar == 0 {
		return strings.TrimSuffix(m.Dollars(), ".00")
	}
	return m.Dollars()
}
