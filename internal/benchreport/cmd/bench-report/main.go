// Command bench-report renders benchmark results as a PNG: either a
// RedisBenchmark as `kubectl get rbench NAME -o json` prints it, or the JSON
// results the runner (cmd/bench) prints, one per line. With -table it also
// prints the comparison table (one row per target, ratios to everysec and
// always) on standard output.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/benchreport"
)

func main() {
	in := flag.String("in", "-", "RedisBenchmark JSON or runner results (JSON lines); - is stdin.")
	out := flag.String("out", "bench-report.png", "PNG to write.")
	title := flag.String("title", "", "Title (default: the benchmark's name).")
	table := flag.Bool("table", false, "Also print the comparison table on standard output.")
	flag.Parse()
	if err := run(*in, *out, *title, *table); err != nil {
		fmt.Fprintln(os.Stderr, "bench-report:", err)
		os.Exit(1)
	}
}

func run(in, out, title string, table bool) error {
	var data []byte
	var err error
	if in == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(in)
	}
	if err != nil {
		return err
	}
	results, crashes, name, err := decode(data)
	if err != nil {
		return err
	}
	if table {
		if err := benchreport.Table(os.Stdout, results, crashes); err != nil {
			return err
		}
	}
	if title == "" {
		title = "Persistence modes compared: " + name
	}
	var png bytes.Buffer
	if err := benchreport.Render(&png, title, results); err != nil {
		return err
	}
	return os.WriteFile(out, png.Bytes(), 0o644)
}

// decode reads a RedisBenchmark, or else a stream of runner results.
func decode(data []byte) ([]v1alpha1.BenchmarkResult, []v1alpha1.CrashCheckResult, string, error) {
	var rb v1alpha1.RedisBenchmark
	if err := json.Unmarshal(data, &rb); err == nil && rb.Kind == "RedisBenchmark" {
		if len(rb.Status.Results) == 0 {
			return nil, nil, "", fmt.Errorf("RedisBenchmark %s has no results yet", rb.Name)
		}
		return rb.Status.Results, rb.Status.CrashChecks, rb.Name, nil
	}
	var results []v1alpha1.BenchmarkResult
	var crashes []v1alpha1.CrashCheckResult
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var r bench.Result
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, "", fmt.Errorf("neither a RedisBenchmark nor runner results: %w", err)
		}
		results = append(results, bench.StatusResults(r)...)
	}
	return results, crashes, "runner results", nil
}
