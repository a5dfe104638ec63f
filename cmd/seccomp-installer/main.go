// Command seccomp-installer keeps a seccomp profile in the kubelet's seccomp
// directory of the node it runs on. The chart runs it as a DaemonSet with the
// profile mounted from a ConfigMap and only the profile's host directory
// mounted from the node.
//
// It installs the profile at start and then re-checks it every --interval, so
// a changed ConfigMap or a node whose directory was wiped converges without a
// restart. Writes are atomic (temporary file, fsync, rename): the kubelet never
// hands a half-written profile to the runtime. On exit the profile stays, since
// pods that run under it may restart at any time. With --check it only reports
// whether the node's copy matches, for the readiness probe.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	var (
		source, target string
		check          bool
		interval       time.Duration
	)
	flag.StringVar(&source, "source", "", "The profile to install.")
	flag.StringVar(&target, "target", "", "Where the node's kubelet reads it.")
	flag.BoolVar(&check, "check", false, "Exit 0 when target matches source, 1 otherwise, and change nothing.")
	flag.DurationVar(&interval, "interval", time.Minute, "How often to re-check the installed profile.")
	flag.Parse()
	if source == "" || target == "" {
		fmt.Fprintln(os.Stderr, "seccomp-installer: --source and --target are required")
		os.Exit(2)
	}
	if check {
		if err := matches(source, target); err != nil {
			fmt.Fprintln(os.Stderr, "seccomp-installer:", err)
			os.Exit(1)
		}
		return
	}

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		changed, err := install(source, target)
		switch {
		case err != nil:
			log.Error("installing the seccomp profile", "target", target, "error", err)
		case changed:
			log.Info("installed the seccomp profile", "target", target)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// matches returns nil when target holds exactly the profile in source.
func matches(source, target string) error {
	want, err := os.ReadFile(source)
	if err != nil {
		return err
	}
	have, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	if !bytes.Equal(have, want) {
		return fmt.Errorf("%s differs from %s", target, source)
	}
	return nil
}

// install writes source to target unless target already matches, and reports
// whether it wrote.
func install(source, target string) (bool, error) {
	want, err := os.ReadFile(source)
	if err != nil {
		return false, err
	}
	if err := validate(want); err != nil {
		return false, fmt.Errorf("%s: %w", source, err)
	}
	if have, err := os.ReadFile(target); err == nil && bytes.Equal(have, want) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // already gone after the rename
	err = errors.Join(write(tmp, want), tmp.Close())
	if err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), target)
}

func write(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	return f.Sync()
}

// validate rejects what the runtime would reject only when a pod starts.
func validate(profile []byte) error {
	var p struct {
		DefaultAction string            `json:"defaultAction"`
		Syscalls      []json.RawMessage `json:"syscalls"`
	}
	if err := json.Unmarshal(profile, &p); err != nil {
		return fmt.Errorf("not a seccomp profile: %w", err)
	}
	if p.DefaultAction == "" {
		return errors.New("not a seccomp profile: no defaultAction")
	}
	return nil
}
