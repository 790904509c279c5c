package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// churnPlot draws ns/op of arm + Stop against the number of live timers,
// at the highest GOMAXPROCS measured, with each median's confidence
// interval. It reports false if there is nothing to draw.
func churnPlot(res *results, path string) (bool, error) {
	names := res.names("Churn/impl=wheel/")
	if len(names) == 0 {
		return false, nil
	}
	procs := res.procsOf(names[0])
	p0 := procs[len(procs)-1]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Arm + Stop one timer next to N live timers (GOMAXPROCS=%s)", p0)
	p.X.Label.Text = "live timers"
	p.Y.Label.Text = "ns/op (median, bars: 95% confidence interval)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	labels := make([]string, len(names))
	for i, n := range names {
		labels[i] = humanCount(strings.TrimPrefix(caseOf(n), "live="))
	}
	p.NominalX(labels...)
	for i, impl := range []string{"runtime", "wheel", "gozero"} {
		var pts errPoints
		for j, n := range names {
			s := res.get(withImpl(n, impl), p0, "ns/op")
			if s == nil {
				continue
			}
			m, lo, hi := s.sum.Center*1e9, s.sum.Lo*1e9, s.sum.Hi*1e9
			if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
				lo, hi = m, m
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: float64(j), Y: m})
			pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{m - lo, hi - m})
		}
		if len(pts.XYs) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return false, err
		}
		c := implColor(impl, 1)
		line.Color, points.Color = c, c
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(i)
		points.Radius = vg.Points(3)
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return false, err
		}
		bars.Color = c
		p.Add(line, points, bars)
		p.Legend.Add(implLabel("impl="+impl), line, points)
	}
	// Head room on the log axis for the legend, which sits top left.
	p.Y.Max *= 4
	p.Y.Min /= 1.5
	return true, save(p, path, 7*vg.Inch, 4.5*vg.Inch)
}

// scalingPlot draws throughput at each GOMAXPROCS for the parallel
// benchmarks, as grouped bars. It reports false if there is nothing to
// draw.
func scalingPlot(res *results, path string) (bool, error) {
	var cases []scalingCase
	for _, c := range scalingCases {
		if c.label != "" && len(res.procsOf(c.wheel)) > 1 { // the plot keeps to AfterFunc for the runtime
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return false, nil
	}
	procs := res.procsOf(cases[0].wheel)
	p := plot.New()
	p.Title.Text = "Throughput from 8 goroutines per core, next to 10^6 live timers"
	p.Y.Label.Text = "million operations per second (median)"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	labels := make([]string, len(cases))
	for i, c := range cases {
		labels[i] = c.label
	}
	p.NominalX(labels...)
	type series struct{ impl, procs string }
	var all []series
	for _, impl := range []string{"runtime", "wheel"} {
		for _, pr := range procs {
			all = append(all, series{impl, pr})
		}
	}
	w := vg.Points(14)
	for i, s := range all {
		vs := make(plotter.Values, len(cases))
		for j, c := range cases {
			name := c.other
			if s.impl == "wheel" {
				name = c.wheel
			}
			if x := res.get(name, s.procs, "ns/op"); x != nil && x.sum.Center > 0 {
				vs[j] = 1e-6 / x.sum.Center
			}
		}
		bars, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return false, err
		}
		shade := 1.0
		if s.procs != procs[len(procs)-1] {
			shade = 0.45
		}
		bars.Color = implColor(s.impl, shade)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(len(all)-1)/2)
		p.Add(bars)
		who := "Go runtime timers"
		if s.impl == "wheel" {
			who = "timingwheel"
		}
		p.Legend.Add(fmt.Sprintf("%s, GOMAXPROCS=%s", who, s.procs), bars)
	}
	p.X.Min, p.X.Max = -0.6, float64(len(cases))-0.4
	p.Y.Min = 0
	p.Y.Max *= 1.35 // room for the legend
	return true, save(p, path, 7.5*vg.Inch, 4.5*vg.Inch)
}

func save(p *plot.Plot, path string, w, h vg.Length) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(w, h, path)
}

// ticks125 labels a log axis at 1, 2 and 5 times the powers of ten.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return ts
}

type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// implColor is the implementation's colour; shade < 1 lightens it.
func implColor(impl string, shade float64) color.Color {
	c := map[string]color.RGBA{
		"runtime": {R: 0x44, G: 0x44, B: 0x44, A: 0xff}, // grey
		"wheel":   {R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, // blue
		"gozero":  {R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, // orange
	}[impl]
	c.A = 0xff
	light := func(v uint8) uint8 { return uint8(255 - shade*(255-float64(v))) }
	return color.RGBA{R: light(c.R), G: light(c.G), B: light(c.B), A: 0xff}
}

func humanCount(s string) string {
	switch s {
	case "0":
		return "0"
	case "1000":
		return "10^3"
	case "10000":
		return "10^4"
	case "100000":
		return "10^5"
	case "1000000":
		return "10^6"
	}
	return s
}
