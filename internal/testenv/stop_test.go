package testenv

import (
	"bufio"
	"os/exec"
	"testing"
	"time"
)

// A process that ignores SIGTERM is killed after the grace period, as the
// kubelet kills a container, and Stop returns.
func TestStopKillsAfterTheGracePeriod(t *testing.T) {
	defer func(g time.Duration) { stopGrace = g }(stopGrace)
	stopGrace = 500 * time.Millisecond
	cmd := exec.Command("sh", "-c", "trap '' TERM; echo trapped; while :; do sleep 0.05; done")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// SIGTERM before the trap is set would end it at once.
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "trapped\n" {
		t.Fatalf("the shell said %q (%v), want trapped", line, err)
	}
	s := &Server{Addr: "ignores-sigterm", cmd: cmd, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	start := time.Now()
	s.Stop(t)
	if took := time.Since(start); took < stopGrace {
		t.Fatalf("Stop returned after %s, before the grace period of %s", took, stopGrace)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != -1 {
		t.Fatalf("the process ended with %v; want killed by a signal", cmd.ProcessState)
	}
}
