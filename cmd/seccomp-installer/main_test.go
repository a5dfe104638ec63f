package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	source, target := filepath.Join(dir, "source.json"), filepath.Join(dir, "host", "io_uring.json")
	if err := os.Mkdir(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := []byte(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`)
	if err := os.WriteFile(source, profile, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := matches(source, target); err == nil {
		t.Fatal("check passed before the profile was installed")
	}
	for i, wantChanged := range []bool{true, false} {
		changed, err := install(source, target)
		if err != nil || changed != wantChanged {
			t.Fatalf("install #%d: changed=%v err=%v, want changed=%v", i+1, changed, err, wantChanged)
		}
	}
	if err := matches(source, target); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("installed profile: %v, %v", fi, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(target)); len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}

	// A node whose copy drifted is repaired; a broken source never replaces a good copy.
	if err := os.WriteFile(target, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := install(source, target); err != nil || !changed {
		t.Fatalf("repair: changed=%v err=%v", changed, err)
	}
	if err := os.WriteFile(source, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := install(source, target); err == nil {
		t.Fatal("installed an invalid profile")
	}
	if got, _ := os.ReadFile(target); string(got) != string(profile) {
		t.Fatalf("target changed to %q", got)
	}
}
