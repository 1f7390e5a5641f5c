package views

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Charts are inline SVG drawn on the server: no script, no chart library,
// no CDN. Colours and strokes come from classes in static/app.css (the CSP
// allows no inline style), so the SVG carries geometry only. Each chart has
// a <title> and <desc> and a data table beside it (in a <details>) for
// screen readers and for copying figures.

// Chart geometry, in the SVG's own units (its viewBox); the SVG scales to
// its container's width.
const (
	chartWidth  = 720
	chartHeight = 260
	plotLeft    = 56
	plotRight   = chartWidth - 12
	plotTop     = 12
	plotBottom  = chartHeight - 36
)

// ChartBox is the plot area inside a chart's viewBox.
type ChartBox struct{ Left, Top, Right, Bottom float64 }

func defaultBox() ChartBox { return ChartBox{plotLeft, plotTop, plotRight, plotBottom} }

// Tick is one labelled axis position (Pos in SVG units along the axis).
type Tick struct {
	Pos   float64
	Label string
}

// ChartTable is a chart's data as a table: the accessible fallback.
type ChartTable struct {
	Columns []string
	Rows    [][]string
}

// SeriesInput is one series of a time-series chart: a value per x (NaN: no
// value, the line breaks there).
type SeriesInput struct {
	Name   string
	Class  string // CSS class of its line (and area), e.g. "s-alloc"
	Values []float64
	Area   bool // fill under the line
	Step   bool // a step line (a guarantee changes at instants)
}

// LineSeries is a series as drawn: SVG path data for its line and area.
type LineSeries struct {
	Name, Class string
	Line, Area  string // path "d" attributes; Area empty when not filled
}

// TimeSeriesChart is a line/area chart over time.
type TimeSeriesChart struct {
	TestID      string
	Title, Desc string
	Unit        string
	Width       int
	Height      int
	Box         ChartBox
	XTicks      []Tick
	YTicks      []Tick
	Series      []LineSeries
	Empty       bool // no values at all: the chart says so instead of drawing
	Table       ChartTable
}

// ViewBox is the SVG viewBox attribute.
func (c TimeSeriesChart) ViewBox() string { return viewBox(c.Width, c.Height) }

func viewBox(w, h int) string { return "0 0 " + strconv.Itoa(w) + " " + strconv.Itoa(h) }

// NewTimeSeries scales series over the times xs (one value per x, oldest
// first) into the plot box: x by time between the first and the last x,
// y from 0 to a round top above the largest value.
func NewTimeSeries(testID, title, desc, unit string, xs []time.Time, series []SeriesInput) TimeSeriesChart {
	c := TimeSeriesChart{TestID: testID, Title: title, Desc: desc, Unit: unit, Width: chartWidth, Height: chartHeight, Box: defaultBox()}
	top := 0.0
	any := false
	for _, s := range series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				any = true
				top = max(top, v)
			}
		}
	}
	c.Table.Columns = append(c.Table.Columns, "Time (UTC)")
	for _, s := range series {
		c.Table.Columns = append(c.Table.Columns, s.Name+" ("+unit+")")
	}
	if len(xs) == 0 || !any {
		c.Empty = true
		return c
	}
	ticks, yTop := NiceTicks(top)
	for _, v := range ticks {
		c.YTicks = append(c.YTicks, Tick{Pos: c.yOf(v, yTop), Label: fmtNum(v)})
	}
	first, last := xs[0], xs[len(xs)-1]
	xOf := func(t time.Time) float64 {
		if !last.After(first) {
			return (c.Box.Left + c.Box.Right) / 2
		}
		return c.Box.Left + float64(t.Sub(first))/float64(last.Sub(first))*(c.Box.Right-c.Box.Left)
	}
	for _, d := range DayTicks(first, last) {
		c.XTicks = append(c.XTicks, Tick{Pos: xOf(d), Label: d.Format("Jan 2")})
	}
	for _, s := range series {
		var line, area strings.Builder
		var run []string // points of the current unbroken run
		flush := func(lastX float64) {
			if len(run) == 0 {
				return
			}
			line.WriteString("M" + strings.Join(run, " L"))
			if s.Area {
				area.WriteString("M" + pt(parseX(run[0]), c.Box.Bottom) + " L" + strings.Join(run, " L") + " L" + pt(lastX, c.Box.Bottom) + " Z")
			}
			run = run[:0]
		}
		prevX, prevY := 0.0, 0.0
		for i, v := range s.Values {
			if i >= len(xs) {
				break
			}
			x := xOf(xs[i])
			if math.IsNaN(v) {
				flush(prevX)
				continue
			}
			y := c.yOf(v, yTop)
			if s.Step && len(run) > 0 && y != prevY {
				run = append(run, pt(x, prevY))
			}
			run = append(run, pt(x, y))
			prevX, prevY = x, y
		}
		flush(prevX)
		c.Series = append(c.Series, LineSeries{Name: s.Name, Class: s.Class, Line: line.String(), Area: area.String()})
	}
	for i, x := range xs {
		row := []string{x.UTC().Format("2006-01-02 15:04")}
		for _, s := range series {
			if i < len(s.Values) && !math.IsNaN(s.Values[i]) {
				row = append(row, fmtNum(s.Values[i]))
			} else {
				row = append(row, "no data")
			}
		}
		c.Table.Rows = append(c.Table.Rows, row)
	}
	return c
}

func (c TimeSeriesChart) yOf(v, top float64) float64 {
	return c.Box.Bottom - v/top*(c.Box.Bottom-c.Box.Top)
}

func pt(x, y float64) string { return fmtCoord(x) + "," + fmtCoord(y) }

func parseX(p string) float64 {
	x, _, _ := strings.Cut(p, ",")
	f, _ := strconv.ParseFloat(x, 64)
	return f
}

// fmtCoord writes SVG coordinates to 0.1 unit: exact enough, and short.
func fmtCoord(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }

// fmtNum shows a value with at most two decimals.
func fmtNum(f float64) string { return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) }

// NiceTicks returns y-axis tick values from 0 to a round top at or above
// max: steps of 1, 2, 2.5 or 5 times a power of ten, four or five of them.
// A max of 0 (or less) gives the axis 0..1.
func NiceTicks(maxV float64) ([]float64, float64) {
	if maxV <= 0 || math.IsNaN(maxV) || math.IsInf(maxV, 0) {
		return []float64{0, 1}, 1
	}
	rough := maxV / 4
	mag := math.Pow(10, math.Floor(math.Log10(rough)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= rough-1e-9*mag {
			step = m * mag
			break
		}
	}
	top := math.Ceil(maxV/step-1e-9) * step
	var out []float64
	for i := 0; float64(i)*step <= top+step/1e6; i++ {
		out = append(out, float64(i)*step)
	}
	return out, top
}

// DayTicks are the UTC midnights within [first, last] to label an x axis
// with, at most seven, evenly spaced in whole days.
func DayTicks(first, last time.Time) []time.Time {
	start := first.UTC().Truncate(24 * time.Hour)
	if start.Before(first) {
		start = start.Add(24 * time.Hour)
	}
	days := int(last.Sub(start).Hours()/24) + 1
	if days <= 0 {
		return nil
	}
	every := (days + 6) / 7
	var out []time.Time
	for d := start; !d.After(last); d = d.Add(time.Duration(every) * 24 * time.Hour) {
		out = append(out, d)
	}
	return out
}

// BarSeries is one stacked layer of a bar chart: a value per category.
type BarSeries struct {
	Name, Class string
	Values      []float64
}

// Bar is one category's stack as drawn.
type Bar struct {
	Label    string
	LabelX   float64
	ShowTick bool // label this bar on the axis (at most about seven are)
	Segments []BarSegment
}

// BarSegment is one layer of a bar: a rectangle and its value for the
// tooltip (<title>) and screen readers.
type BarSegment struct {
	Class      string
	X, Y, W, H float64
	Title      string
}

// StackedBarChart stacks series per category (e.g. guaranteed and borrowed
// hours per day).
type StackedBarChart struct {
	TestID      string
	Title, Desc string
	Unit        string
	Width       int
	Height      int
	Box         ChartBox
	YTicks      []Tick
	Bars        []Bar
	Legend      []LegendItem
	Empty       bool
	Table       ChartTable
}

// LegendItem names a series and its class.
type LegendItem struct{ Name, Class string }

// ViewBox is the SVG viewBox attribute.
func (c StackedBarChart) ViewBox() string { return viewBox(c.Width, c.Height) }

// NewStackedBars scales the series stacked per category into the plot box.
func NewStackedBars(testID, title, desc, unit string, categories []string, series []BarSeries) StackedBarChart {
	c := StackedBarChart{TestID: testID, Title: title, Desc: desc, Unit: unit, Width: chartWidth, Height: chartHeight, Box: defaultBox()}
	c.Table.Columns = []string{"Day"}
	for _, s := range series {
		c.Legend = append(c.Legend, LegendItem{s.Name, s.Class})
		c.Table.Columns = append(c.Table.Columns, s.Name+" ("+unit+")")
	}
	totals := make([]float64, len(categories))
	top := 0.0
	for i := range categories {
		for _, s := range series {
			if i < len(s.Values) && s.Values[i] > 0 {
				totals[i] += s.Values[i]
			}
		}
		top = max(top, totals[i])
	}
	if len(categories) == 0 || top == 0 {
		c.Empty = true
		return c
	}
	ticks, yTop := NiceTicks(top)
	scale := (c.Box.Bottom - c.Box.Top) / yTop
	for _, v := range ticks {
		c.YTicks = append(c.YTicks, Tick{Pos: c.Box.Bottom - v*scale, Label: fmtNum(v)})
	}
	slot := (c.Box.Right - c.Box.Left) / float64(len(categories))
	w := slot * 0.8
	every := (len(categories) + 6) / 7
	for i, cat := range categories {
		x := c.Box.Left + float64(i)*slot + (slot-w)/2
		b := Bar{Label: cat, LabelX: x + w/2, ShowTick: i%every == 0}
		y := c.Box.Bottom
		row := []string{cat}
		for _, s := range series {
			v := 0.0
			if i < len(s.Values) && s.Values[i] > 0 {
				v = s.Values[i]
			}
			row = append(row, fmtNum(v))
			if v == 0 {
				continue
			}
			h := v * scale
			y -= h
			b.Segments = append(b.Segments, BarSegment{Class: s.Class, X: x, Y: y, W: w, H: h,
				Title: fmt.Sprintf("%s, %s: %s %s", cat, s.Name, fmtNum(v), unit)})
		}
		c.Bars = append(c.Bars, b)
		c.Table.Rows = append(c.Table.Rows, row)
	}
	return c
}

// F formats an SVG coordinate for an attribute.
func F(f float64) string { return fmtCoord(f) }
