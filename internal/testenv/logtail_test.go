package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// logRecorder keeps what logTail prints.
type logRecorder struct {
	testing.TB
	logged []string
}

func (r *logRecorder) Logf(format string, args ...any) {
	r.logged = append(r.logged, fmt.Sprintf(format, args...))
}

// A failed test prints the end of a component's log, and says where the
// whole log is kept; the file holds all of it.
func TestLogTailKeepsTheWholeLog(t *testing.T) {
	var log strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&log, "line %d\n", i)
	}
	path := filepath.Join(t.TempDir(), "weed.log")
	if err := os.WriteFile(path, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &logRecorder{TB: t}
	logTail(r, "SeaweedFS", path)
	if len(r.logged) != 1 {
		t.Fatalf("logTail printed %d messages, want 1: %q", len(r.logged), r.logged)
	}
	printed := r.logged[0]
	m := regexp.MustCompile(`^SeaweedFS log, last 40 lines \(all of it in (\S+)\):\nline 61\n`).FindStringSubmatch(printed)
	if m == nil || !strings.HasSuffix(printed, "line 100") || strings.Contains(printed, "line 60\n") {
		t.Fatalf("logTail printed %q, want the header and lines 61 to 100", printed)
	}
	defer func() { _ = os.Remove(m[1]) }()
	if kept, err := os.ReadFile(m[1]); err != nil || string(kept) != log.String() {
		t.Errorf("the kept log (%v) is not the whole log", err)
	}
}
