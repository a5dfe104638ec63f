package main

import (
	"fmt"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/correctness"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/suite"
)

// Both engines in their durable mode: the restart is a SIGKILL, so the
// check covers ordering, rewrites and durability at once.
var correctnessModes = []server.Mode{server.Always, server.UringDurable}

func runCorrectness(e *env, modes []server.Mode, requests int) {
	for _, m := range modes {
		for _, test := range correctness.Tests {
			name := "correctness/" + m.Name + "/" + test
			if m.Uring && e.caps.UringSkip != "" {
				e.rep.Add(suite.Result{Name: name, Status: suite.Skip, Detail: e.caps.UringSkip})
				continue
			}
			o, err := correctness.Run(correctness.Config{Bin: e.bin, WorkDir: e.work, LogDir: e.logs, Mode: m, Test: test,
				Clients: 50, Requests: requests, Rand: e.rnd})
			res := suite.Result{Name: name, Status: suite.Pass, Metrics: o,
				Detail: fmt.Sprintf("%d requests by 50 clients in %.1fs (%.0f/s), %d BGREWRITEAOF started (%d finished), restart by %s, %d values verified",
					o.Requests, o.Seconds, o.OpsPerSec, o.RewritesStarted, o.RewritesFinished, o.Restart, o.Checked)}
			if err != nil {
				res.Status = suite.Fail
				res.Detail = err.Error()
			}
			e.rep.Add(res)
		}
	}
}
