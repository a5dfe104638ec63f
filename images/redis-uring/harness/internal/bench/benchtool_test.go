package bench

import (
	"os"
	"strings"
	"testing"
)

func TestParseToolRealOutput(t *testing.T) {
	data, err := os.ReadFile("testdata/set.txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseTool(string(data))
	if err != nil {
		t.Fatal(err)
	}
	want := ToolResult{RPS: 29717.68, P999Ms: 12.743}
	if r.RPS != want.RPS || r.P999Ms != want.P999Ms {
		t.Errorf("got rps %v p999 %v, want %v %v", r.RPS, r.P999Ms, want.RPS, want.P999Ms)
	}
	if !(r.P50Ms > 0 && r.P50Ms <= r.P99Ms && r.P99Ms <= r.P999Ms && r.P999Ms <= r.MaxMs) {
		t.Errorf("percentiles out of order: %+v", r)
	}
}

func TestParseToolRejectsTruncatedOutput(t *testing.T) {
	data, err := os.ReadFile("testdata/set.txt")
	if err != nil {
		t.Fatal(err)
	}
	cut, _, found := strings.Cut(string(data), "Summary:")
	if !found {
		t.Fatal("testdata/set.txt has no summary")
	}
	if _, err := ParseTool(cut); err == nil {
		t.Error("output without a summary parsed without error")
	}
}
