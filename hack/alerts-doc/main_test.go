package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListAndRunbooks(t *testing.T) {
	dir := t.TempDir()
	rules, runbooks, readme := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "docs", "runbooks"), filepath.Join(dir, "chart", "README.md")
	write(t, filepath.Join(runbooks, "disk.md"), "# Disk\n\n## DiskFull\n\nWhat to do.\n")
	write(t, readme, "intro\n<!-- alerts:begin -->\nstale\n<!-- alerts:end -->\noutro\n")
	const valid = `groups:
  - name: disk
    rules:
      - record: disk:used:ratio
        expr: used / size
      - alert: DiskFull
        expr: disk:used:ratio > 0.9
        for: 5m
        labels: {severity: critical}
        annotations:
          runbook_url: disk.md#diskfull
          summary: The disk is full | nearly
`
	write(t, rules, valid)
	if err := run(rules, runbooks, readme); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(readme)
	want := "intro\n<!-- alerts:begin -->\n\n**disk**\n\n| Alert | Severity | For | Fires when | Runbook |\n|---|---|---|---|---|\n" +
		"| `DiskFull` | critical | 5m | The disk is full \\| nearly | [disk](../docs/runbooks/disk.md#diskfull) |\n\n<!-- alerts:end -->\noutro\n"
	if string(got) != want {
		t.Errorf("README:\n%s\nwant:\n%s", got, want)
	}

	for _, tc := range []struct{ desc, from, to, wantErr string }{
		{"no runbook", "runbook_url: disk.md#diskfull", "description: x", `runbook_url ""`},
		{"another anchor", "disk.md#diskfull", "disk.md#full", `the anchor must be "diskfull"`},
		{"a missing page", "disk.md#", "other.md#", "other.md"},
		{"no summary", "summary: The disk is full | nearly", "description: x", "no summary annotation"},
	} {
		write(t, rules, strings.Replace(valid, tc.from, tc.to, 1))
		if err := run(rules, runbooks, readme); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.desc, err, tc.wantErr)
		}
	}
	write(t, filepath.Join(runbooks, "disk.md"), "# Disk\n\n## DiskAlmostFull\n")
	write(t, rules, valid)
	if err := run(rules, runbooks, readme); err == nil || !strings.Contains(err.Error(), "no heading `## DiskFull`") {
		t.Errorf("a page without the alert's heading: err = %v", err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
