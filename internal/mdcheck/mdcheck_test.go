package mdcheck

import (
	"strings"
	"testing"
)

func TestCheckFile(t *testing.T) {
	cases := map[string][]string{
		// A YAML block closed one line early: the fence meant to close it
		// opens a block that swallows the next sections, as the README's
		// block under RedisBenchmark once did.
		"early-close.md": {
			`early-close.md:16: a heading inside the code block opened at line 14 (info "")`,
			`early-close.md:20: a heading inside the code block opened at line 14 (info "")`,
			`early-close.md:14: this code fence is never closed`,
		},
		"unclosed.md": {
			`unclosed.md:8: this code fence is never closed`,
			`unclosed.md:12: a heading inside the code block opened at line 8 (info "yaml")`,
		},
		"links.md": {
			`links.md:3: link to docs/missing.md: no such file`,
			`links.md:7: link to gone.txt: no such file`,
			`links.md:11: link to nowhere.md: no such file`,
		},
		"clean.md": nil,
	}
	for file, want := range cases {
		t.Run(file, func(t *testing.T) {
			problems, err := CheckFile("testdata", file)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range problems {
				got = append(got, p.String())
			}
			if len(got) != len(want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
			}
			for _, w := range want {
				if !containsPrefix(got, w) {
					t.Errorf("no problem starts with %q in:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
