// Command gen-dashboards renders the Grafana dashboards of internal/dashboards
// into a directory (the chart's dashboards/).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/uring-redis/uring-redis-operator/internal/dashboards"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen-dashboards DIR")
		os.Exit(2)
	}
	for _, d := range dashboards.All() {
		b, err := dashboards.Render(d.Build)
		if err == nil {
			err = os.WriteFile(filepath.Join(os.Args[1], d.File), b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gen-dashboards: %s: %v\n", d.File, err)
			os.Exit(1)
		}
	}
}
