package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// clockTick is USER_HZ, the unit of utime/stime in /proc/*/stat.
const clockTick = 100.0

// taskCPU reads utime+stime (seconds) and comm from a /proc stat file.
func taskCPU(statPath string) (comm string, cpu float64, err error) {
	data, err := os.ReadFile(statPath)
	if err != nil {
		return "", 0, err
	}
	s := string(data)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return "", 0, fmt.Errorf("%s: bad stat line", statPath)
	}
	comm = s[open+1 : close]
	f := strings.Fields(s[close+1:])
	// After "(comm)": state is f[0]; utime and stime are fields 14 and 15
	// of the full line, i.e. f[11] and f[12].
	if len(f) < 13 {
		return "", 0, fmt.Errorf("%s: short stat line", statPath)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("%s: bad utime/stime", statPath)
	}
	return comm, (ut + st) / clockTick, nil
}

// ThreadCPU is what the sampler saw during one run: the process total and
// its main thread from /proc, and the io_uring kernel-side threads (iou-wrk-*
// io-wq workers, iou-sqp-* SQPOLL) which are threads of the server process.
type ThreadCPU struct {
	ProcessSec   float64 `json:"process_cpu_s"`
	MainSec      float64 `json:"main_thread_cpu_s"`
	UringSec     float64 `json:"io_uring_threads_cpu_s"`
	UringThreads int     `json:"io_uring_threads_seen"`
	OtherSec     float64 `json:"other_threads_cpu_s"`
}

// Sampler polls /proc/<pid>/task while a run is in progress. Threads that
// exit between two samples lose their last interval (an undercount).
type Sampler struct {
	pid        int
	stop, done chan struct{}
	mu         sync.Mutex
	first      map[string]float64 // tid -> cpu at first sight
	last       map[string]float64
	comm       map[string]string
	proc0      float64
}

// StartSampler begins polling every interval.
func StartSampler(pid int, interval time.Duration) *Sampler {
	s := &Sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{}),
		first: map[string]float64{}, last: map[string]float64{}, comm: map[string]string{}}
	_, s.proc0, _ = taskCPU(fmt.Sprintf("/proc/%d/stat", pid))
	s.sample(true)
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.sample(false)
				return
			case <-t.C:
				s.sample(false)
			}
		}
	}()
	return s
}

func (s *Sampler) sample(initial bool) {
	dir := fmt.Sprintf("/proc/%d/task", s.pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ents {
		comm, cpu, err := taskCPU(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue
		}
		tid := e.Name()
		if _, ok := s.first[tid]; !ok {
			base := 0.0 // a thread born during the run counts from zero
			if initial {
				base = cpu
			}
			s.first[tid] = base
		}
		s.last[tid], s.comm[tid] = cpu, comm
	}
}

// Stop ends sampling and returns the per-thread accounting.
func (s *Sampler) Stop() ThreadCPU {
	close(s.stop)
	<-s.done
	var r ThreadCPU
	_, proc1, _ := taskCPU(fmt.Sprintf("/proc/%d/stat", s.pid))
	r.ProcessSec = proc1 - s.proc0
	s.mu.Lock()
	defer s.mu.Unlock()
	main := strconv.Itoa(s.pid)
	for tid, last := range s.last {
		d := last - s.first[tid]
		switch {
		case tid == main:
			r.MainSec = d
		case strings.HasPrefix(s.comm[tid], "iou-"):
			r.UringSec += d
			r.UringThreads++
		default:
			r.OtherSec += d
		}
	}
	return r
}

// DevStats are a block device's cumulative counters (/sys/dev/block/M:m/stat).
type DevStats struct {
	WriteSectors float64
	Flushes      float64
	FlushTicksMs float64
}

// DevicePath returns the sysfs stat file of the device holding dir.
func DevicePath(dir string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", err
	}
	p := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev))
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// ReadDev reads the counters; flush fields exist since Linux 5.5.
func ReadDev(path string) (DevStats, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return DevStats{}, err
	}
	f := strings.Fields(string(data))
	if len(f) < 17 {
		return DevStats{}, fmt.Errorf("%s: %d fields, want 17 (kernel without flush accounting)", path, len(f))
	}
	num := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v }
	return DevStats{WriteSectors: num(6), Flushes: num(15), FlushTicksMs: num(16)}, nil
}
