package main

import (
	"fmt"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/logreads"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/suite"
)

// Every mode that appends with buffered writes (uring durable's direct
// writes never read either).
var logreadsModes = []server.Mode{server.Always, server.Everysec, server.UringFast, server.UringDurable}

// runLogreads: appending the log reads (almost) nothing from the device. A
// read per page would be one per 4 KiB of log; the read-ahead of the zeros
// costs a few large reads per chunk.
func runLogreads(e *env, modes []server.Mode) {
	for _, m := range modes {
		name := "logreads/" + m.Name
		if m.Uring && e.caps.UringSkip != "" {
			e.rep.Add(suite.Result{Name: name, Status: suite.Skip, Detail: e.caps.UringSkip})
			continue
		}
		o, err := logreads.Run(logreads.Config{Bin: e.bin, WorkDir: e.work, LogDir: e.logs, Mode: m, Requests: 20000, ValueSize: 100})
		res := suite.Result{Name: name, Status: suite.Pass, Metrics: o,
			Detail: fmt.Sprintf("%d device reads while the log grew by %d bytes (%d pages)", o.Reads, o.LogBytes, o.Pages)}
		switch {
		case err != nil:
			res.Status, res.Detail = suite.Fail, err.Error()
		case o.Pages < 100:
			res.Status, res.Detail = suite.Fail, "the log grew by fewer than 100 pages: nothing to judge; "+res.Detail
		case o.Reads*10 > o.Pages:
			res.Status, res.Detail = suite.Fail, "appending read the device (more than one read per 10 pages of log: the pages ahead of the tail are not cached); "+res.Detail
		}
		e.rep.Add(res)
	}
}
