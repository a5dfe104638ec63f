package controllers

import (
	"strings"
	"testing"
)

func TestDecideRoll(t *testing.T) {
	var (
		old      = rollingServer{ready: true, replicating: true}
		updated  = rollingServer{updated: true, ready: true, replicating: true}
		starting = rollingServer{updated: true}
		syncing  = rollingServer{updated: true, ready: true}
		down     = rollingServer{}
	)
	for _, tc := range []struct {
		desc           string
		servers, held  int32
		pods           map[int]rollingServer
		primary        int
		want           int32
		wantSwitchOver bool
		wantWhy        string
	}{
		{"rolled out", 3, 0, map[int]rollingServer{0: updated, 1: updated, 2: updated}, 0, 0, false, "every server"},
		{"a new template holds every server: the top replica goes first", 3, 3, map[int]rollingServer{0: old, 1: old, 2: old}, 0, 2, false, "replica 2"},
		{"the restarted replica has no pod yet", 3, 2, map[int]rollingServer{0: old, 1: old}, 0, 2, false, "server 2"},
		{"the restarted replica is not Ready yet", 3, 2, map[int]rollingServer{0: old, 1: old, 2: starting}, 0, 2, false, "server 2"},
		{"the restarted replica does not replicate yet", 3, 2, map[int]rollingServer{0: old, 1: old, 2: syncing}, 0, 2, false, "server 2"},
		{"the restarted replica serves: the next one goes", 3, 2, map[int]rollingServer{0: old, 1: old, 2: updated}, 0, 1, false, "replica 1"},
		{"only the primary is left: switch over first", 3, 1, map[int]rollingServer{0: old, 1: updated, 2: updated}, 0, 0, true, "primary"},
		{"after the switchover the old primary goes", 3, 1, map[int]rollingServer{0: old, 1: updated, 2: updated}, 2, 0, false, "replica 0"},
		{"the old primary restarts", 3, 0, map[int]rollingServer{0: starting, 1: updated, 2: updated}, 2, 0, false, "server 0"},
		{"the primary at the top switches over before anything rolls", 3, 3, map[int]rollingServer{0: old, 1: old, 2: old}, 2, 2, true, "primary"},
		{"the primary not known: a Ready server waits", 3, 3, map[int]rollingServer{0: old, 1: old, 2: old}, -1, 3, false, "not known"},
		{"the primary not known: a server that is not Ready rolls", 3, 3, map[int]rollingServer{0: old, 1: old, 2: down}, -1, 2, false, "not Ready"},
		{"a replica that is not Ready rolls at once", 2, 2, map[int]rollingServer{0: old, 1: down}, 0, 1, false, "not Ready"},
		{"a server added on the new template must serve first", 4, 4, map[int]rollingServer{0: old, 1: old, 2: old, 3: starting}, 0, 4, false, "server 3"},
		{"a partition above the servers counts as holding them all", 2, 5, map[int]rollingServer{0: old, 1: old}, 0, 1, false, "replica 1"},
	} {
		step := decideRoll(tc.servers, tc.held, tc.pods, tc.primary)
		if step.partition != tc.want || step.switchOver != tc.wantSwitchOver || !strings.Contains(step.why, tc.wantWhy) {
			t.Errorf("%s: partition %d, switch over %t (%q); want %d, %t (with %q)", tc.desc, step.partition, step.switchOver, step.why, tc.want, tc.wantSwitchOver, tc.wantWhy)
		}
	}
}
