package benchreport

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

func TestRender(t *testing.T) {
	var results []v1alpha1.BenchmarkResult
	for i, mode := range []string{"aof-always", "aof-everysec", "uring-durable", "uring-fast"} {
		for j, cmd := range []string{"set", "incr"} {
			results = append(results, v1alpha1.BenchmarkResult{
				Target: mode, Mode: mode, Command: cmd, OpsPerSecond: int64(10000 * (i + 1)), CPUMicrosPerKop: int64(1000 * (j + 1)),
				P50Micros: 100, P99Micros: 900, P999Micros: 2000, FsyncP99Micros: int64(500 * i),
			})
		}
	}
	img := render(t, results)
	b := img.Bounds()
	if b.Dx() < 1000 || b.Dy() < 600 {
		t.Errorf("image is %dx%d", b.Dx(), b.Dy())
	}
	// Every mode's colour appears: its bars were drawn.
	for i := range 4 {
		if !hasColour(img, palette[i]) {
			t.Errorf("no bar in the colour of target %d", i)
		}
	}
}

// A mode on a second storage is drawn in a lighter shade of its colour on
// the first; another mode gets its own colour.
func TestRenderTwoStorages(t *testing.T) {
	var results []v1alpha1.BenchmarkResult
	for _, target := range []struct{ name, mode, storage string }{
		{"always", "aof-always", "local-nvme"}, {"durable", "uring-durable", "local-nvme"},
		{"always-gp3", "aof-always", "gp3"}, {"durable-gp3", "uring-durable", "gp3"},
	} {
		results = append(results, v1alpha1.BenchmarkResult{Target: target.name, Mode: target.mode, Storage: target.storage,
			Command: "set", OpsPerSecond: 10000, CPUMicrosPerKop: 1000, P99Micros: 900, FsyncP99Micros: 500})
	}
	img := render(t, results)
	for _, want := range []color.Color{palette[0], palette[1], lighter(palette[0], 1), lighter(palette[1], 1)} {
		if !hasColour(img, want) {
			t.Errorf("no bar in %v", want)
		}
	}
	if hasColour(img, palette[2]) {
		t.Error("a mode on its second storage took a colour of its own")
	}
}

// render is Render's PNG of results, decoded.
func render(t *testing.T, results []v1alpha1.BenchmarkResult) image.Image {
	t.Helper()
	var out bytes.Buffer
	if err := Render(&out, "test", results); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&out)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return img
}

func hasColour(img image.Image, want color.Color) bool {
	b := img.Bounds()
	r2, g2, b2, _ := want.RGBA()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r1, g1, b1, _ := img.At(x, y).RGBA()
			if r1 == r2 && g1 == g2 && b1 == b2 {
				return true
			}
		}
	}
	return false
}

func TestRenderRefuses(t *testing.T) {
	if err := Render(&bytes.Buffer{}, "empty", nil); err == nil {
		t.Error("rendered no results")
	}
	var many []v1alpha1.BenchmarkResult
	for i := range len(palette) + 1 {
		many = append(many, v1alpha1.BenchmarkResult{Target: string(rune('a' + i)), Mode: "none", Command: "set", OpsPerSecond: 1})
	}
	if err := Render(&bytes.Buffer{}, "many", many); err == nil {
		t.Error("rendered more targets than colours")
	}
}
