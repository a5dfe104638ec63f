// Command check-markdown fails on Markdown files that would render other than
// meant (see package mdcheck): `make verify` runs it on every Markdown file
// git tracks outside testdata.
//
//	go run ./internal/mdcheck/cmd/check-markdown FILE.md...
//
// Paths are relative to the working directory, the repository's top.
package main

import (
	"fmt"
	"os"

	"github.com/uring-redis/uring-redis-operator/internal/mdcheck"
)

func main() {
	found := 0
	for _, file := range os.Args[1:] {
		problems, err := mdcheck.CheckFile(".", file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "check-markdown:", err)
			os.Exit(1)
		}
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, p)
		}
		found += len(problems)
	}
	if found > 0 {
		fmt.Fprintf(os.Stderr, "check-markdown: %d problems\n", found)
		os.Exit(1)
	}
}
