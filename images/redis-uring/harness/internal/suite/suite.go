// Package suite records check outcomes, prints them as they happen and ends
// with the `N passed, N failed, N skipped` line the CI reads.
package suite

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Status of one check.
type Status string

const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Result is one check's outcome; Metrics carry measured figures for the JSON
// report.
type Result struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Detail  string `json:"detail"`
	Metrics any    `json:"metrics,omitempty"`
}

// Report collects results.
type Report struct {
	mu      sync.Mutex
	out     io.Writer
	Results []Result `json:"results"`
}

// New prints to out.
func New(out io.Writer) *Report { return &Report{out: out} }

// Add records and prints a result.
func (r *Report) Add(res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Results = append(r.Results, res)
	fmt.Fprintf(r.out, "%s: %s: %s\n", res.Status, res.Name, res.Detail)
}

// Logf prints progress that is not a result.
func (r *Report) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "  "+format+"\n", args...)
}

// Counts returns passed, failed, skipped.
func (r *Report) Counts() (p, f, s int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range r.Results {
		switch res.Status {
		case Pass:
			p++
		case Fail:
			f++
		case Skip:
			s++
		}
	}
	return
}

// Summary is the closing line.
func (r *Report) Summary() string {
	p, f, s := r.Counts()
	return fmt.Sprintf("%d passed, %d failed, %d skipped", p, f, s)
}

// WriteJSON stores the results as dir/name.
func (r *Report) WriteJSON(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.mu.Lock()
	data, err := json.MarshalIndent(r.Results, "", "  ")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o644)
}
