package testenv

import (
	"os"
	"slices"
	"testing"
)

func TestShardArgs(t *testing.T) {
	defer func(args []string) { os.Args = args }(os.Args)
	os.Args = []string{"/b/controllers.test", "-test.paniconexit0", "-test.gocoverdir=/b/gocoverdir", "-test.v=test2json",
		"-test.run=Old", "-test.timeout=25m0s", "-test.coverprofile=/b/_cover_.out"}
	got := shardArgs(1, "^(TestA|TestC)$")
	want := []string{"-test.run=^(TestA|TestC)$", "-test.paniconexit0", "-test.gocoverdir=/b/gocoverdir", "-test.v=test2json",
		"-test.timeout=25m0s", "-test.coverprofile=/b/shard2-_cover_.out"}
	if !slices.Equal(got, want) {
		t.Errorf("shardArgs:\n got %q\nwant %q", got, want)
	}
}
