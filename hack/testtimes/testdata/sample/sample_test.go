// Package sample is what testtimes's tests run go test -json on: a slow
// test, a failing one with a failing subtest, a skipped one, a passing one.
package sample

import (
	"testing"
	"time"
)

func TestSlow(t *testing.T) {
	time.Sleep(300 * time.Millisecond)
	t.Log("passing output")
}

func TestFails(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Error("the subtest's failure") })
	t.Log("the parent's log")
}

func TestSkipped(t *testing.T) { t.Skip("not here") }

func TestPasses(t *testing.T) {}
