package server

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestParseInfo(t *testing.T) {
	info := ParseInfo("# Persistence\r\naof_enabled:1\r\naof_last_write_status:ok\r\n\r\n# CPU\r\nused_cpu_sys:1.25\r\nweird:a:b\r\n")
	want := map[string]string{"aof_enabled": "1", "aof_last_write_status": "ok", "used_cpu_sys": "1.25", "weird": "a:b"}
	if len(info) != len(want) {
		t.Fatalf("got %v", info)
	}
	for k, v := range want {
		if info[k] != v {
			t.Errorf("%s = %q, want %q", k, info[k], v)
		}
	}
}

func TestModeConfigAndDurability(t *testing.T) {
	for _, tc := range []struct {
		mode    Mode
		durable bool
		lines   []string
	}{
		{None, false, []string{`save ""`, "appendonly no"}},
		{Always, true, []string{"appendonly yes", "appendfsync always"}},
		{Everysec, false, []string{"appendfsync everysec"}},
		{No, false, []string{"appendfsync no"}},
		{UringDurable, true, []string{"appendfsync-engine uring", "aof-uring-ack durable"}},
		{UringFast, false, []string{"appendfsync-engine uring", "aof-uring-ack fast"}},
		{UringDurableSQPoll, true, []string{"aof-uring-ack durable", "aof-uring-sqpoll yes"}},
		{UringDurable2, true, []string{"aof-uring-ack durable", "aof-uring-fsyncs-in-flight 2"}},
		{UringDurableFdatasync, true, []string{"aof-uring-ack durable", "aof-uring-direct-writes no"}},
		{NoneIOThreads, false, []string{"io-threads 2", "appendonly no"}},
		{NoneUringReplies, false, []string{"io-uring-replies yes", "appendonly no"}},
		{AlwaysNoPrealloc, true, []string{"appendfsync always", "aof-preallocate no"}},
		{UringDurableNoPrealloc, true, []string{"aof-uring-ack durable", "aof-preallocate no"}},
		{UringFastNoPrealloc, false, []string{"aof-uring-ack fast", "aof-preallocate no"}},
	} {
		if got := tc.mode.Durable(); got != tc.durable {
			t.Errorf("%s: Durable() = %v", tc.mode.Name, got)
		}
		lines := tc.mode.ConfigLines()
		for _, l := range tc.lines {
			if !slices.Contains(lines, l) {
				t.Errorf("%s: config %q lacks %q", tc.mode.Name, lines, l)
			}
		}
		if !tc.mode.Fdatasync && slices.Contains(lines, "aof-uring-direct-writes no") {
			t.Errorf("%s: turns direct writes off", tc.mode.Name)
		}
		if !tc.mode.NoPrealloc && slices.Contains(lines, "aof-preallocate no") {
			t.Errorf("%s: renders aof-preallocate no", tc.mode.Name)
		}
		if !tc.mode.Uring && slices.ContainsFunc(lines, func(l string) bool { return len(l) > 8 && l[:8] == "aof-urin" }) {
			t.Errorf("%s: posix mode renders uring options: %q", tc.mode.Name, lines)
		}
	}
}

func TestModeByName(t *testing.T) {
	for _, m := range append(AllModes, NoneUringReplies, NoneIOThreads) {
		got, err := ModeByName(m.Name)
		if err != nil || got != m {
			t.Errorf("ModeByName(%q) = %v, %v", m.Name, got, err)
		}
	}
	if _, err := ModeByName("sometimes"); err == nil {
		t.Error("unknown mode accepted")
	}
	b, err := ModeByName("uring-durable@baseline")
	if err != nil || b.Build != BaselineBuild || b.Name != "uring-durable@baseline" || !b.Durable() ||
		!slices.Equal(b.ConfigLines(), UringDurable.ConfigLines()) {
		t.Errorf("ModeByName(uring-durable@baseline) = %+v, %v", b, err)
	}
	if _, err := ModeByName("sometimes@baseline"); err == nil {
		t.Error("unknown mode on the baseline accepted")
	}
}

func TestFreezeStopsEveryThread(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	s := &Server{Cmd: cmd, exited: make(chan struct{})}
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	defer s.Kill()
	if running, err := s.runningThreads(); err != nil || running == "" {
		t.Fatalf("before SIGSTOP: running %q, err %v", running, err)
	}
	if err := s.Freeze(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if running, _ := s.runningThreads(); running != "" {
		t.Errorf("after Freeze still running: %s", running)
	}
}

func TestModeDirectWrites(t *testing.T) {
	for m, want := range map[*Mode]bool{
		&UringDurable: true, &UringDurable2: true, &UringDurableSQPoll: true,
		&UringDurableFdatasync: false, &UringDurableNoPrealloc: false, &UringFast: false, &Always: false,
	} {
		if got := m.DirectWrites(); got != want {
			t.Errorf("%s: DirectWrites() = %v, want %v", m.Name, got, want)
		}
	}
}
