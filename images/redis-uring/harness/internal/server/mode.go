package server

import (
	"fmt"
	"strings"
)

// Mode is one persistence configuration under test. Modes run the same
// binary and differ in configuration only, except that the benchmark can run
// each one a second time on a baseline build (Build "baseline") to compare
// two builds of the server.
type Mode struct {
	Name        string // stable identifier used in reports
	Build       string // "" for the build under test, BaselineBuild for the baseline
	Persistence string // "none", "rdb" or "aof"
	Fsync       string // appendfsync for aof
	Uring       bool   // appendfsync-engine uring
	Ack         string // aof-uring-ack: "durable" or "fast"
	SQPoll      bool   // aof-uring-sqpoll yes
	IOThreads   int    // io-threads (0: the server's default, 1)
	Replies     bool   // io-uring-replies yes
	// NoPrealloc turns aof-preallocate off: the INCR file grows by appending,
	// as upstream's does, and every fdatasync commits the ext4 journal.
	NoPrealloc bool
	// Fdatasync turns aof-uring-direct-writes off: every durable batch is
	// written with write(2) and fdatasync'ed through the ring, the engine's
	// path before direct writes. InFlight is aof-uring-fsyncs-in-flight (0:
	// the server's default, 1).
	Fdatasync bool
	InFlight  int
	// Replicas follow the server in the benchmark (same binary and mode, on
	// the same volume); AckReplicas is its aof-uring-ack-replicas.
	Replicas    int
	AckReplicas int
}

// UringAppendfsync is the appendfsync policy rendered next to
// `appendfsync-engine uring`: the engine decides when to fsync, and `always`
// states the contract (every acknowledged batch fsynced) it must keep.
var UringAppendfsync = "always"

// The modes of issue 3, in report order.
var (
	None               = Mode{Name: "none", Persistence: "none"}
	RDB                = Mode{Name: "rdb", Persistence: "rdb"}
	Always             = Mode{Name: "always", Persistence: "aof", Fsync: "always"}
	Everysec           = Mode{Name: "everysec", Persistence: "aof", Fsync: "everysec"}
	No                 = Mode{Name: "no", Persistence: "aof", Fsync: "no"}
	UringDurable       = Mode{Name: "uring-durable", Persistence: "aof", Uring: true, Ack: "durable"}
	UringFast          = Mode{Name: "uring-fast", Persistence: "aof", Uring: true, Ack: "fast"}
	UringDurableSQPoll = Mode{Name: "uring-durable-sqpoll", Persistence: "aof", Uring: true, Ack: "durable", SQPoll: true}
)

// The AOF modes on upstream's layout (aof-preallocate no), to measure what
// the preallocated layout gives each of them: "<mode>-noprealloc".
var (
	AlwaysNoPrealloc       = Always.WithoutPrealloc()
	EverysecNoPrealloc     = Everysec.WithoutPrealloc()
	UringDurableNoPrealloc = UringDurable.WithoutPrealloc()
	UringFastNoPrealloc    = UringFast.WithoutPrealloc()
)

// The durable engine's write paths: two batches in flight, and each batch
// written with write(2) and fdatasync'ed instead of one O_DIRECT write with
// RWF_DSYNC (the server's default where the log is preallocated).
var (
	UringDurable2         = Mode{Name: "uring-durable-2", Persistence: "aof", Uring: true, Ack: "durable", InFlight: 2}
	UringDurableFdatasync = Mode{Name: "uring-durable-fdatasync", Persistence: "aof", Uring: true, Ack: "durable",
		Fdatasync: true}
)

// AllModes lists every mode the benchmark knows.
var AllModes = []Mode{None, RDB, Always, Everysec, No, UringDurable, UringFast, UringDurableSQPoll,
	UringDurable2, UringDurableFdatasync,
	AlwaysNoPrealloc, EverysecNoPrealloc, UringDurableNoPrealloc, UringFastNoPrealloc}

// NoPreallocSuffix names a mode run with aof-preallocate no.
const NoPreallocSuffix = "-noprealloc"

// WithoutPrealloc returns m on upstream's appending layout.
func (m Mode) WithoutPrealloc() Mode {
	m.Name, m.NoPrealloc = m.Name+NoPreallocSuffix, true
	return m
}

// The reply-path variants of the replies benchmark: no persistence, so that
// what differs is how replies reach the sockets.
var (
	NoneUringReplies = Mode{Name: "none-uring-replies", Persistence: "none", Replies: true}
	NoneIOThreads    = Mode{Name: "none-io-threads-2", Persistence: "none", IOThreads: 2}
)

// The replication variants (issue 16): uring durable with one replica, its
// replies waiting for the local fsync only, or for the replica's too.
var (
	UringDurableReplica     = Mode{Name: "uring-durable-replica", Persistence: "aof", Uring: true, Ack: "durable", Replicas: 1}
	UringDurableAckReplicas = Mode{Name: "uring-durable-ack-replicas-1", Persistence: "aof", Uring: true, Ack: "durable",
		Replicas: 1, AckReplicas: 1}
)

// BaselineBuild labels the modes the benchmark runs on its baseline build:
// "<mode>@baseline".
const BaselineBuild = "baseline"

// OnBaseline returns m as run on the baseline build.
func (m Mode) OnBaseline() Mode {
	m.Name, m.Build = m.Name+"@"+BaselineBuild, BaselineBuild
	return m
}

// ModeByName finds a mode by its report name, "<mode>@baseline" included.
func ModeByName(name string) (Mode, error) {
	if base, ok := strings.CutSuffix(name, "@"+BaselineBuild); ok {
		m, err := ModeByName(base)
		return m.OnBaseline(), err
	}
	for _, m := range append(append([]Mode(nil), AllModes...), NoneUringReplies, NoneIOThreads, UringDurableReplica,
		UringDurableAckReplicas) {
		if m.Name == name {
			return m, nil
		}
	}
	return Mode{}, fmt.Errorf("unknown mode %q", name)
}

// Durable reports whether the mode promises that every acknowledged write
// survives a power cut.
func (m Mode) Durable() bool {
	if m.Persistence != "aof" {
		return false
	}
	if m.Uring {
		return m.Ack == "durable"
	}
	return m.Fsync == "always"
}

// DirectWrites reports whether the server writes the mode's durable batches
// as O_DIRECT writes with RWF_DSYNC (aof-uring-direct-writes, on by default,
// over the preallocated log).
func (m Mode) DirectWrites() bool {
	return m.Persistence == "aof" && m.Uring && m.Ack == "durable" && !m.Fdatasync && !m.NoPrealloc
}

// ConfigLines renders the mode as valkey.conf directives.
func (m Mode) ConfigLines() []string {
	var lines []string
	if m.IOThreads > 0 {
		lines = append(lines, fmt.Sprintf("io-threads %d", m.IOThreads))
	}
	if m.Replies {
		lines = append(lines, "io-uring-replies yes")
	}
	switch m.Persistence {
	case "none":
		return append(lines, `save ""`, "appendonly no")
	case "rdb":
		// Valkey's built-in default save points.
		return append(lines, `save 3600 1 300 100 60 10000`, "appendonly no")
	}
	lines = append(lines, `save ""`, "appendonly yes")
	if m.NoPrealloc {
		lines = append(lines, "aof-preallocate no")
	}
	if !m.Uring {
		return append(lines, "appendfsync "+m.Fsync)
	}
	lines = append(lines,
		"appendfsync "+UringAppendfsync,
		"appendfsync-engine uring",
		"aof-uring-ack "+m.Ack)
	if m.SQPoll {
		lines = append(lines, "aof-uring-sqpoll yes")
	}
	if m.Fdatasync {
		lines = append(lines, "aof-uring-direct-writes no")
	}
	if m.InFlight > 0 {
		lines = append(lines, fmt.Sprintf("aof-uring-fsyncs-in-flight %d", m.InFlight))
	}
	if m.AckReplicas > 0 {
		lines = append(lines, fmt.Sprintf("aof-uring-ack-replicas %d", m.AckReplicas))
	}
	return lines
}
