package main

import (
	"flag"
)

type benchOpts struct{}

func benchFlags(fs *flag.FlagSet) *benchOpts { return &benchOpts{} }
func runBench(e *env, b *benchOpts) error    { return nil }
