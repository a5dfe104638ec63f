package main

import (
	"flag"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
)

var diskfullModes = []server.Mode{server.Always, server.Everysec, server.UringDurable, server.UringFast}
var correctnessModes = []server.Mode{server.Always, server.UringDurable}

func runDiskfull(e *env, ms []server.Mode)                  {}
func runCorrectness(e *env, ms []server.Mode, requests int) {}

type benchOpts struct{}

func benchFlags(fs *flag.FlagSet) *benchOpts { return &benchOpts{} }
func runBench(e *env, b *benchOpts) error    { return nil }
