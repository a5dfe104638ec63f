package main

import (
	"fmt"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/diskfull"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/suite"
)

// Both engines: posix `always` (fail-stop upstream) and `everysec`
// (refuse and recover), uring in both ack modes (refuse and recover).
var diskfullModes = []server.Mode{server.Always, server.Everysec, server.UringDurable, server.UringFast}

func runDiskfull(e *env, modes []server.Mode) {
	for _, m := range modes {
		name := "diskfull/" + m.Name
		if m.Uring && e.caps.UringSkip != "" {
			e.rep.Add(suite.Result{Name: name, Status: suite.Skip, Detail: e.caps.UringSkip})
			continue
		}
		o, err := diskfull.Run(diskfull.Config{Bin: e.bin, WorkDir: e.work, LogDir: e.logs, Mode: m, FSSizeMiB: 16, BallastMiB: 4, ValueSize: 16 << 10})
		res := suite.Result{Name: name, Status: suite.Pass, Metrics: o}
		how := fmt.Sprintf("refused with %q, reads served, writes resumed %d ms after freeing space", o.Refusal, o.ResumeMs)
		if o.HeldWrite {
			how = fmt.Sprintf("the write that hit the full disk was held (no reply) and answered OK after space was freed; others refused with %q, reads served, writes resumed %d ms after freeing space", o.Refusal, o.ResumeMs)
		}
		if o.ServerExited {
			how = "server stopped (upstream fail-stop for appendfsync always), restarted once space was freed"
		}
		res.Detail = fmt.Sprintf("%d writes acknowledged before full; %s; %q; 0 of %d acknowledged writes lost",
			o.AckedBefore, how, o.CheckAOF, o.AckedBefore+o.AckedAfter)
		if err != nil {
			res.Status = suite.Fail
			res.Detail = err.Error()
		}
		e.rep.Add(res)
	}
}
