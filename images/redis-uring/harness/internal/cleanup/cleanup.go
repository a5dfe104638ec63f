// Package cleanup undoes what the harness set up on the host (server process
// groups, mounts, loop devices, image files) on every exit path: normal
// return, failed check, panic in main, SIGINT/SIGTERM.
package cleanup

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Handle identifies one registered undo step.
type Handle struct{ id uint64 }

var (
	mu      sync.Mutex
	next    uint64
	steps   = map[uint64]step{}
	order   []uint64
	exiting bool           // All has begun: the process is about to exit
	running sync.WaitGroup // steps being run by Handle.Run
)

type step struct {
	what string
	fn   func() error
}

// Register adds an undo step; steps run last-registered first. Register it
// before creating the resource. Once All has begun (a signal arrived), Register
// never returns: the caller must not create anything more.
func Register(what string, fn func() error) Handle {
	mu.Lock()
	if exiting {
		mu.Unlock()
		select {}
	}
	defer mu.Unlock()
	next++
	steps[next] = step{what, fn}
	order = append(order, next)
	return Handle{next}
}

// Run executes one step now (if still registered) and forgets it.
func (h Handle) Run() error {
	mu.Lock()
	s, ok := steps[h.id]
	delete(steps, h.id)
	if ok {
		running.Add(1)
		defer running.Done()
	}
	mu.Unlock()
	if !ok {
		return nil
	}
	return s.fn()
}

// Forget drops a step without running it (the resource was released already).
func (h Handle) Forget() {
	mu.Lock()
	delete(steps, h.id)
	mu.Unlock()
}

// All runs every registered step, newest first, reporting failures on
// stderr, and waits for steps other goroutines are running.
func All() {
	mu.Lock()
	exiting = true
	ids := append([]uint64(nil), order...)
	mu.Unlock()
	defer running.Wait()
	for i := len(ids) - 1; i >= 0; i-- {
		h := Handle{ids[i]}
		mu.Lock()
		s, ok := steps[h.id]
		mu.Unlock()
		if !ok {
			continue
		}
		if err := h.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "cleanup: %s: %v\n", s.what, err)
		}
	}
	mu.Lock()
	order = nil
	mu.Unlock()
}

// OnSignal runs All and exits when SIGINT, SIGTERM or SIGHUP arrives.
func OnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-ch
		fmt.Fprintf(os.Stderr, "harness: %v: cleaning up\n", sig)
		All()
		os.Exit(130)
	}()
}
