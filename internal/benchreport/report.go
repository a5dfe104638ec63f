// Package benchreport renders RedisBenchmark results as PNG charts for people
// who would rather look than read: throughput, server CPU per 1000
// operations, p99 latency and fsync p99, one bar per persistence mode, grouped
// by command.
package benchreport

import (
	"fmt"
	"image/color"
	"io"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// figure is one chart: a title, a unit and how to read a result's value.
type figure struct {
	title, unit string
	value       func(v1alpha1.BenchmarkResult) float64
}

var figures = []figure{
	{"Throughput", "ops/s", func(r v1alpha1.BenchmarkResult) float64 { return float64(r.OpsPerSecond) }},
	{"Server CPU per 1000 operations", "ms", func(r v1alpha1.BenchmarkResult) float64 { return float64(r.CPUMicrosPerKop) / 1000 }},
	{"Latency p99", "ms", func(r v1alpha1.BenchmarkResult) float64 { return float64(r.P99Micros) / 1000 }},
	{"fsync p99", "ms", func(r v1alpha1.BenchmarkResult) float64 { return float64(r.FsyncP99Micros) / 1000 }},
}

// palette tells modes apart; colour-blind safe (Okabe-Ito).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{86, 180, 233, 255}, color.RGBA{213, 94, 0, 255},
	color.RGBA{240, 228, 66, 255}, color.RGBA{0, 0, 0, 255},
}

// series is one target's bars: its label, its colour and a value per command.
type series struct {
	label  string
	colour color.Color
	values map[string]v1alpha1.BenchmarkResult
}

// colours gives each target a colour of palette: its own, or, for a target
// of the same mode as one on another storage, that target's colour lighter
// by a step per storage, so that a mode on two device classes reads as one
// hue. ok is false when the palette runs out.
type colours struct {
	storages []string
	// byKind is the palette index of each mode (with its replicas and
	// acknowledgements) and the storages it was given on.
	byKind map[string]int
	onKind map[string][]string
	next   int
}

func (c *colours) of(r v1alpha1.BenchmarkResult) (color.Color, bool) {
	if c.byKind == nil {
		c.byKind, c.onKind = map[string]int{}, map[string][]string{}
	}
	if !slices.Contains(c.storages, r.Storage) {
		c.storages = append(c.storages, r.Storage)
	}
	kind := fmt.Sprintf("%s/%d/%d", r.Mode, r.Replicas, r.AckReplicas)
	i, seen := c.byKind[kind]
	if !seen || slices.Contains(c.onKind[kind], r.Storage) {
		if c.next == len(palette) {
			return nil, false
		}
		i, c.next = c.next, c.next+1
		c.byKind[kind], c.onKind[kind] = i, nil
	}
	c.onKind[kind] = append(c.onKind[kind], r.Storage)
	return lighter(palette[i], slices.Index(c.storages, r.Storage)), true
}

// lighter mixes colour with white: by half for step 1, three quarters for 2.
func lighter(colour color.Color, step int) color.Color {
	r, g, b, _ := colour.RGBA()
	mix := func(v uint32) uint8 {
		w := 1 - 1/float64(int(1)<<step)
		return uint8(float64(v>>8)*(1-w) + 255*w)
	}
	return color.RGBA{mix(r), mix(g), mix(b), 255}
}

// Render writes a 2x2 grid of bar charts for the results as PNG.
func Render(w io.Writer, title string, results []v1alpha1.BenchmarkResult) error {
	if len(results) == 0 {
		return fmt.Errorf("no results to render")
	}
	var commands []string
	var targets []*series
	var paint colours
	byTarget := map[string]*series{}
	storages := slices.ContainsFunc(results, func(x v1alpha1.BenchmarkResult) bool { return x.Storage != results[0].Storage })
	for _, r := range results {
		s := byTarget[r.Target]
		if s == nil {
			label := r.Mode
			if r.AckReplicas > 0 {
				label += fmt.Sprintf(", ackReplicas %d", r.AckReplicas)
			}
			if storages {
				label += " on " + r.Storage
			}
			if r.Target != r.Mode {
				label += " (" + r.Target + ")"
			}
			colour, ok := paint.of(r)
			if !ok {
				return fmt.Errorf("%d targets; the report tells at most %d modes apart (on any number of storages)", len(byTarget)+1, len(palette))
			}
			s = &series{label: label, colour: colour, values: map[string]v1alpha1.BenchmarkResult{}}
			byTarget[r.Target] = s
			targets = append(targets, s)
		}
		if _, seen := s.values[r.Command]; !seen && !slices.Contains(commands, r.Command) {
			commands = append(commands, r.Command)
		}
		s.values[r.Command] = r
	}
	const width, height = 16 * vg.Inch, 10 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	header, body := splitTop(dc, 0.6*vg.Inch)
	face := plot.DefaultTextHandler.Cache().Lookup(plot.DefaultFont, 18)
	header.SetColor(color.Black)
	header.FillString(face, vg.Point{X: header.Min.X + 0.3*vg.Inch, Y: header.Min.Y + 0.15*vg.Inch}, title)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Inch / 4, PadY: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	for i, f := range figures {
		p, err := chart(f, commands, targets)
		if err != nil {
			return err
		}
		p.Draw(tiles.At(body, i%2, i/2))
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

func splitTop(c draw.Canvas, h vg.Length) (top, rest draw.Canvas) {
	top, rest = c, c
	top.Min.Y = c.Max.Y - h
	rest.Max.Y = c.Max.Y - h
	return top, rest
}

func chart(f figure, commands []string, targets []*series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = f.title
	p.Y.Label.Text = f.unit
	p.Y.Min = 0
	p.NominalX(commands...)
	p.Legend.Top = true
	barWidth := vg.Points(float64(60) / float64(len(targets)))
	highest := 0.0
	for i, s := range targets {
		values := make(plotter.Values, len(commands))
		for j, c := range commands {
			if r, ok := s.values[c]; ok {
				values[j] = f.value(r)
				highest = max(highest, values[j])
			}
		}
		bars, err := plotter.NewBarChart(values, barWidth)
		if err != nil {
			return nil, err
		}
		bars.Color = s.colour
		bars.LineStyle.Width = 0
		bars.Offset = barWidth * vg.Length(float64(i)-float64(len(targets)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.label, bars)
	}
	// Headroom above the tallest bar keeps the legend off the bars.
	p.Y.Max = highest*1.4 + 1e-9
	return p, nil
}
