package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/powercut"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/suite"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/volume"
)

// Durable modes first: their zero-loss assertion is what matters most.
var (
	powercutModes = []server.Mode{server.Always, server.UringDurable, server.UringDurable2, server.Everysec,
		server.No, server.UringFast, server.UringDurableFdatasync, server.UringDurableNoPrealloc}
	durableModes = []server.Mode{server.Always, server.UringDurable, server.UringDurable2, server.UringDurableFdatasync}
	// On the fusedisk volumes: the durable modes as users run them, and
	// `no` to show the cut discards what was never flushed there too.
	fuseDiskModes = []server.Mode{server.Always, server.UringDurable, server.No}
)

type powercutRun struct {
	trials, clients  int
	loadMin, loadMax time.Duration
	volume           volume.Kind
}

func defaultPowercut(trials int) *powercutRun {
	return &powercutRun{trials: trials, clients: 50, loadMin: 500 * time.Millisecond, loadMax: 2500 * time.Millisecond, volume: volume.Loop}
}

// on is p with the trials on another volume kind.
func (p *powercutRun) on(v volume.Kind) *powercutRun {
	q := *p
	q.volume = v
	return &q
}

// checkName is "powercut/<mode>" on the loop volume (as it always was) and
// "powercut/<volume>/<mode>" on the others.
func (p *powercutRun) checkName(what string) string {
	if p.volume == volume.Loop {
		return "powercut/" + what
	}
	return "powercut/" + string(p.volume) + "/" + what
}

// run cuts the power `trials` times per mode. Durable modes must lose
// nothing; for the others the loss is measured and reported. Whatever the
// mode, the server must restart and no key may hold a value never written.
func (p *powercutRun) run(e *env, modes []server.Mode) {
	var noModeLost, noModeRan bool
	for _, m := range modes {
		name := p.checkName(m.Name)
		if m.Uring && e.caps.UringSkip != "" {
			e.rep.Add(suite.Result{Name: name, Status: suite.Skip, Detail: e.caps.UringSkip})
			continue
		}
		s := p.series(e, name, m.Name, p.config(e, m), m.Durable())
		if m == server.No {
			noModeRan = true
			noModeLost = noModeLost || s.TrialsWithLoss > 0
		}
	}
	// `appendfsync no` never fsyncs during a short load, so a working cut
	// must lose something there; if not, the cut did not cut and the
	// zero-loss results above prove nothing.
	if noModeRan {
		res := suite.Result{Name: p.checkName("cut-is-effective"), Status: suite.Pass,
			Detail: "appendfsync no lost acknowledged writes, so the cut discards unsynced data on " + p.volume.Describe()}
		if !noModeLost {
			res.Status = suite.Fail
			res.Detail = "appendfsync no lost nothing: the power cut did not discard unsynced data on " + p.volume.Describe()
		}
		e.rep.Add(res)
	}
}

// failover runs the failover trials (powercut package comment): uring
// durable with aof-uring-ack-replicas 1 must lose nothing when the primary's
// node is lost and the replica loses power; with 0 the loss is measured.
func (p *powercutRun) failover(e *env) {
	for _, k := range []int{1, 0} {
		label := fmt.Sprintf("%s-ack-replicas-%d", server.UringDurable.Name, k)
		name := "failover/" + label
		if e.caps.UringSkip != "" {
			e.rep.Add(suite.Result{Name: name, Status: suite.Skip, Detail: e.caps.UringSkip})
			continue
		}
		cfg := p.config(e, server.UringDurable)
		cfg.Replica, cfg.AckReplicas = true, k
		p.series(e, name, label, cfg, k >= 1)
	}
}

func (p *powercutRun) config(e *env, m server.Mode) powercut.Config {
	return powercut.Config{
		Bin: e.bin, WorkDir: e.work, LogDir: e.logs, Mode: m, Clients: p.clients, Observers: 5,
		LoadMin: p.loadMin, LoadMax: p.loadMax, ValueSize: 64, FSSizeMiB: 256, Rand: e.rnd,
		Volume: p.volume, FuseDisk: e.fuseDisk,
	}
}

// series runs the trials of one configuration, logs a line per trial and
// adds the result: zero loss asserted when durable, measured otherwise.
func (p *powercutRun) series(e *env, name, label string, cfg powercut.Config, durable bool) powercut.Summary {
	var trials []powercut.Trial
	for i := 1; i <= p.trials; i++ {
		t := powercut.Run(cfg, i)
		trials = append(trials, t)
		line := fmt.Sprintf("%s trial %d/%d: cut after %.2fs, %d acked (%.0f/s, %d after the cut), lost %d",
			label+" on "+string(p.volume), i, p.trials, t.LoadSeconds, t.Acked, t.AckedPerSec, t.AckedAfterCut, t.Lost)
		if t.Lost > 0 {
			line += fmt.Sprintf(" (oldest lost ack %.0f ms before the cut)", t.LossWindowMs)
		}
		if t.Survived > 0 {
			line += fmt.Sprintf(", newest surviving ack %.0f ms before the cut", t.LastSurvivorMs)
		} else if t.Acked > 0 {
			line += ", nothing survived"
		}
		if t.Rewrites > 0 {
			line += fmt.Sprintf(", %d BGREWRITEAOF during the load", t.Rewrites)
		}
		if t.DirectWrites > 0 {
			line += fmt.Sprintf(", %d direct writes", t.DirectWrites)
		}
		if t.Observed > 0 {
			line += fmt.Sprintf(", %d observed by readers in flight (%d of them lost)", t.Observed, t.ObservedLost)
		}
		if t.Notified > 0 {
			line += fmt.Sprintf(", %d named by keyspace notifications (%d of them lost)", t.Notified, t.NotifiedLost)
		}
		if t.InFlightFound > 0 {
			line += fmt.Sprintf(", %d unacknowledged in-flight writes survived", t.InFlightFound)
		}
		if t.Error != "" {
			line += ", ERROR: " + t.Error
		}
		e.rep.Logf("%s", line)
		if durable {
			for _, lw := range t.LostWrites {
				e.rep.Logf("    lost: %s", describeLost(lw))
			}
		}
	}
	s := powercut.Summarize(cfg.Mode, trials)
	res := suite.Result{Name: name, Metrics: s, Status: suite.Pass}
	detail := fmt.Sprintf("%d trials, %d acknowledged writes, %d lost in %d trials (max %d in one trial; loss window p50 %.1f ms, p99 %.1f ms, max %.1f ms), %.0f acked/s; %d writes observed by readers in flight, %d of them lost; %d named by keyspace notifications, %d of them lost; %d trials cut during BGREWRITEAOF load; by kind (acked/lost/observed/notified): %s",
		s.Trials, s.Acked, s.Lost, s.TrialsWithLoss, s.MaxLost, s.LossWindowP50Ms, s.LossWindowP99Ms, s.MaxLossWindowMs, s.MeanAckedPerSec, s.Observed, s.ObservedLost, s.Notified, s.NotifiedLost, s.TrialsRewriting, kindFigures(s.Kinds))
	if s.DirectWrites > 0 {
		detail += fmt.Sprintf("; %d batches written as direct writes", s.DirectWrites)
	}
	declined := cfg.Volume.DirectDeclined()
	if cfg.Mode.DirectWrites() && declined != "" {
		detail += fmt.Sprintf("; direct writes declined: %s", strings.Join(s.DirectDeclined, ", "))
	}
	switch {
	case s.Errors > 0:
		res.Status = suite.Fail
		detail = fmt.Sprintf("%d of %d trials failed (restart or corruption; see trial lines); ", s.Errors, s.Trials) + detail
	case durable && s.Lost > 0:
		res.Status = suite.Fail
		detail = "durable mode lost acknowledged writes: " + detail
	case durable && s.ObservedLost > 0:
		res.Status = suite.Fail
		detail = "durable mode let readers observe writes the cut erased: " + detail
	case durable && s.NotifiedLost > 0:
		res.Status = suite.Fail
		detail = "durable mode notified subscribers of writes the cut erased: " + detail
	case cfg.Mode.DirectWrites() && declined == "" && s.DirectWrites == 0:
		res.Status = suite.Fail
		detail = "no batch was written as a direct write (INFO aof_uring_direct_writes stayed 0): the path under test never ran; " + detail
	case cfg.Mode.DirectWrites() && declined != "" && (s.DirectWrites > 0 || !slices.Equal(s.DirectDeclined, []string{declined})):
		res.Status = suite.Fail
		detail = fmt.Sprintf("on a filesystem where an asynchronous RWF_DSYNC write is not followed by an fsync, the server must decline direct writes and say %q (INFO aof_uring_direct_declined_reason: %v); ",
			declined, s.DirectDeclined) + detail
	case durable:
		detail = "0 acknowledged or observed writes lost: " + detail
	default:
		detail = "measured (not asserted): " + detail
	}
	res.Detail = detail
	e.rep.Add(res)
	return s
}

// kindFigures renders per-kind counts in the order writers cycle through
// the kinds: "set 120/0/10/118, eval ...".
func kindFigures(kc map[string]powercut.KindCounts) string {
	var parts []string
	for _, name := range powercut.KindNames() {
		c := kc[name]
		parts = append(parts, fmt.Sprintf("%s %d/%d/%d/%d", name, c.Acked, c.Lost, c.Observed, c.Notified))
	}
	return strings.Join(parts, ", ")
}

func describeLost(lw powercut.LostWrite) string {
	s := fmt.Sprintf("%s (%s, db %s)", lw.Key, lw.Kind, lw.DBs)
	if lw.AckBeforeCutMs != nil {
		s += fmt.Sprintf(", acknowledged %.1f ms before the cut", *lw.AckBeforeCutMs)
	} else {
		s += ", never acknowledged"
	}
	if lw.Observed {
		s += ", observed by a GET"
	}
	if lw.Notified {
		s += ", named by a notification"
	}
	return s
}
