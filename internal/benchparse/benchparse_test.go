package benchparse

import (
	"os"
	"strings"
	"testing"
)

// The captures are valkey-benchmark -t set reports, progress lines (ended
// by \r) included: 2000 requests from 5 clients, 20000 from 50.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		capture string
		want    Report
	}{
		// p99.9 is the first distribution line at or above 99.9% (99.902% <= 2.447 ms).
		{"testdata/set-c5.txt", Report{OpsPerSecond: 26315.79, AvgMs: 0.127, P50Ms: 0.095, P99Ms: 0.743, P999Ms: 2.447, MaxMs: 3.095}},
		// 99.902% <= 12.743 ms; the "Cumulative distribution of latencies"
		// after the blank line (99.910% <= 13.103 ms) is a different table.
		{"testdata/set-c50.txt", Report{OpsPerSecond: 29717.68, AvgMs: 1.264, P50Ms: 0.575, P99Ms: 9.279, P999Ms: 12.743, MaxMs: 16.527}},
	} {
		out, err := os.ReadFile(tc.capture)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(string(out))
		if err != nil {
			t.Fatalf("%s: %v", tc.capture, err)
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.capture, got, tc.want)
		}

		for desc, broken := range map[string]string{
			"no summary":      strings.Split(string(out), "Summary:")[0],
			"no distribution": strings.Replace(string(out), "Latency by percentile distribution", "", 1),
			"error only":      "Could not connect to Valkey at 127.0.0.1:1: Connection refused\n",
		} {
			if _, err := Parse(broken); err == nil {
				t.Errorf("%s, %s: parsed without error", tc.capture, desc)
			}
		}
	}
}
