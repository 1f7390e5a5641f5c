package views

import (
	"bytes"
	"context"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		max   float64
		ticks []float64
	}{
		{0, []float64{0, 1}},
		{-3, []float64{0, 1}},
		{math.NaN(), []float64{0, 1}},
		{13.5, []float64{0, 5, 10, 15}},       // rough 3.4 → step 5
		{100, []float64{0, 25, 50, 75, 100}},  // rough 25 → step 25
		{16, []float64{0, 5, 10, 15, 20}},     // rough 4 → step 5 (2.5 < 4)
		{0.3, []float64{0, 0.1, 0.2, 0.3}},    // rough .075 → step .1
		{64, []float64{0, 20, 40, 60, 80}},    // rough 16 → step 20
		{1, []float64{0, 0.25, 0.5, 0.75, 1}}, // rough .25 → step .25
		{7, []float64{0, 2, 4, 6, 8}},         // rough 1.75 → step 2
	} {
		got, top := NiceTicks(tc.max)
		want := tc.ticks
		if len(got) != len(want) {
			t.Errorf("NiceTicks(%v) = %v, want %v", tc.max, got, want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-9 {
				t.Errorf("NiceTicks(%v) = %v, want %v", tc.max, got, want)
				break
			}
		}
		if top != got[len(got)-1] || (tc.max > 0 && top < tc.max) {
			t.Errorf("NiceTicks(%v): top %v does not cover the max", tc.max, top)
		}
	}
}

func TestDayTicks(t *testing.T) {
	first := time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC)
	got := DayTicks(first, first.Add(30*24*time.Hour))
	// Midnights from Nov 2 to Dec 1 (30 days), every ceil(30/7) = 5th day.
	if len(got) != 6 || got[0].Day() != 2 || got[1].Day() != 7 || got[5].Month() != time.November || got[5].Day() != 27 {
		t.Errorf("DayTicks over 30 days = %v", got)
	}
	if got := DayTicks(first, first.Add(2*time.Hour)); len(got) != 0 {
		t.Errorf("no midnight within 2 hours, got %v", got)
	}
}

var coord = regexp.MustCompile(`(-?[0-9.]+),(-?[0-9.]+)`)

// pointsOf returns every x,y pair of a path.
func pointsOf(t *testing.T, d string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, m := range coord.FindAllStringSubmatch(d, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		out = append(out, [2]float64{x, y})
	}
	return out
}

func TestTimeSeriesPointsStayInTheBox(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var xs []time.Time
	var alloc, guarantee []float64
	for i := range 48 {
		xs = append(xs, start.Add(time.Duration(i)*time.Hour))
		alloc = append(alloc, float64(i%7)*3.3)
		guarantee = append(guarantee, 16)
	}
	alloc[10] = math.NaN() // a missing hour breaks the line
	c := NewTimeSeries("alloc", "Allocation", "desc", "accelerators", xs, []SeriesInput{
		{Name: "Allocated", Class: "s-alloc", Values: alloc, Area: true},
		{Name: "Guarantee", Class: "s-guarantee", Values: guarantee, Step: true},
	})
	if c.Empty || len(c.Series) != 2 {
		t.Fatalf("chart = %+v", c)
	}
	// max 19.8 → ticks 0,5,10,15,20: the top tick sits on the box's top.
	if len(c.YTicks) != 5 || c.YTicks[4].Label != "20" || c.YTicks[4].Pos != c.Box.Top || c.YTicks[0].Pos != c.Box.Bottom {
		t.Errorf("y ticks = %+v", c.YTicks)
	}
	for _, s := range c.Series {
		pts := append(pointsOf(t, s.Line), pointsOf(t, s.Area)...)
		if len(pts) == 0 {
			t.Fatalf("%s has no points", s.Name)
		}
		for _, p := range pts {
			if p[0] < c.Box.Left || p[0] > c.Box.Right || p[1] < c.Box.Top || p[1] > c.Box.Bottom {
				t.Errorf("%s: point %v outside the box %+v", s.Name, p, c.Box)
			}
		}
	}
	if n := strings.Count(c.Series[0].Line, "M"); n != 2 {
		t.Errorf("the NaN hour should split the line in two runs, got %d: %s", n, c.Series[0].Line)
	}
	// The first point is at the left edge, the last at the right; the
	// guarantee of 16 sits at 16/20 of the height.
	g := pointsOf(t, c.Series[1].Line)
	if g[0][0] != c.Box.Left || g[len(g)-1][0] != c.Box.Right {
		t.Errorf("guarantee spans %v..%v, want the box's width", g[0], g[len(g)-1])
	}
	if want := c.Box.Bottom - 16.0/20*(c.Box.Bottom-c.Box.Top); math.Abs(g[0][1]-want) > 0.05 {
		t.Errorf("guarantee at y %v, want %v", g[0][1], want)
	}
	if len(c.Table.Rows) != 48 || c.Table.Rows[10][1] != "no data" || c.Table.Rows[1][1] != "3.3" {
		t.Errorf("table rows: %v", c.Table.Rows[:12])
	}
}

func TestChartsEmpty(t *testing.T) {
	c := NewTimeSeries("alloc", "Allocation", "d", "accelerators", nil, []SeriesInput{{Name: "A", Class: "s-alloc"}})
	b := NewStackedBars("hours", "Hours", "d", "accelerator-hours", []string{"Nov 1"}, []BarSeries{{Name: "G", Class: "s-guaranteed", Values: []float64{0}}})
	if !c.Empty || !b.Empty {
		t.Fatalf("empty data: %v %v", c.Empty, b.Empty)
	}
	var buf bytes.Buffer
	if err := TimeSeries(c).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if err := StackedBars(b).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "<svg") || !strings.Contains(buf.String(), `data-testid="alloc-empty"`) || !strings.Contains(buf.String(), `data-testid="hours-empty"`) {
		t.Errorf("empty charts should say so without drawing:\n%s", buf.String())
	}
}

func TestStackedBarsStackAndRender(t *testing.T) {
	days := []string{"Nov 1", "Nov 2", "Nov 3"}
	b := NewStackedBars("hours", "Guaranteed vs borrowed", "Per day", "accelerator-hours", days, []BarSeries{
		{Name: "Guaranteed", Class: "s-guaranteed", Values: []float64{10, 30, 0}},
		{Name: "Borrowed", Class: "s-borrowed", Values: []float64{5, 10, 0}},
	})
	// max stack 40 → ticks 0..40 by 10: bar 2 fills the box's height.
	if b.Empty || len(b.Bars) != 3 || len(b.Bars[1].Segments) != 2 || len(b.Bars[2].Segments) != 0 {
		t.Fatalf("bars = %+v", b.Bars)
	}
	g, br := b.Bars[1].Segments[0], b.Bars[1].Segments[1]
	if g.Y+g.H != b.Box.Bottom || math.Abs(br.Y-b.Box.Top) > 1e-9 || math.Abs(br.Y+br.H-g.Y) > 1e-9 {
		t.Errorf("bar 2 does not stack borrowed on guaranteed up to the top: %+v %+v (box %+v)", g, br, b.Box)
	}
	if math.Abs(g.H/br.H-3) > 1e-9 {
		t.Errorf("heights %v:%v, want 3:1", g.H, br.H)
	}
	for _, bar := range b.Bars {
		for _, s := range bar.Segments {
			if s.X < b.Box.Left || s.X+s.W > b.Box.Right || s.Y < b.Box.Top-1e-9 || s.Y+s.H > b.Box.Bottom+1e-9 {
				t.Errorf("segment %+v outside the box", s)
			}
		}
	}
	var buf bytes.Buffer
	if err := StackedBars(b).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{
		`<svg class="chart-svg" viewBox="0 0 720 260" role="img" aria-labelledby="hours-title hours-desc"`,
		`<title id="hours-title">Guaranteed vs borrowed</title>`, `<desc id="hours-desc">Per day</desc>`,
		`data-testid="hours"`, `data-testid="hours-table"`, `<title>Nov 2, Borrowed: 10 accelerator-hours</title>`,
		`class="series s-borrowed"`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("bar chart lacks %s", want)
		}
	}
	// The CSP (style-src 'self') forbids inline style: colours come from
	// classes in app.css.
	if strings.Contains(html, "style=") || strings.Contains(html, "<style") || strings.Contains(html, "fill=") {
		t.Errorf("the chart carries inline styling:\n%s", html)
	}
}

func TestTimeSeriesRendersAccessibly(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	xs := []time.Time{start, start.Add(time.Hour)}
	c := NewTimeSeries("alloc", "Allocation <vs> guarantee", "Hourly", "accelerators", xs, []SeriesInput{{Name: "Allocated", Class: "s-alloc", Values: []float64{1, 2}, Area: true}})
	var buf bytes.Buffer
	if err := TimeSeries(c).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{`role="img"`, `<title id="alloc-title">Allocation &lt;vs&gt; guarantee</title>`, `data-testid="alloc-s-alloc"`, `class="area"`, `<th scope="col">Allocated (accelerators)</th>`} {
		if !strings.Contains(html, want) {
			t.Errorf("time series lacks %s:\n%s", want, html)
		}
	}
	if strings.Contains(html, "style=") || slices.Contains(strings.Fields(html), "<script") {
		t.Error("inline style or script in the chart")
	}
}
