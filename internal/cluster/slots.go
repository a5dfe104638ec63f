package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Slots is how many hash slots a Valkey Cluster has.
const Slots = 16384

// Range is the slots from First to Last, both included.
type Range struct{ First, Last int }

func (r Range) String() string {
	if r.First == r.Last {
		return strconv.Itoa(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Share is the slots of shard i of n when they are split evenly: in
// order, the first Slots%n shards one slot more than the others.
func Share(i, n int) Range {
	base, extra := Slots/n, Slots%n
	first := i*base + min(i, extra)
	size := base
	if i < extra {
		size++
	}
	return Range{first, first + size - 1}
}

// ranges are the runs of consecutive slots among slots (sorted).
func ranges(slots []int) []Range {
	var out []Range
	for _, s := range slots {
		if n := len(out); n > 0 && out[n-1].Last == s-1 {
			out[n-1].Last = s
			continue
		}
		out = append(out, Range{s, s})
	}
	return out
}

// FormatSlots writes slots (sorted) as CLUSTER NODES does: "0-5460 5462".
func FormatSlots(slots []int) string {
	var parts []string
	for _, r := range ranges(slots) {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, " ")
}

// Move is slots to move from one primary to another, by node ID.
type Move struct {
	From, To string
	Slots    []int
}

// PlanMoves is how to spread the slots evenly over targets (primaries'
// node IDs, in shard order): target i ends with as many slots as Share(i,
// len(targets)) holds, and a primary of owned that is not a target gives
// all of its away. It moves no slot it need not, and takes from each donor
// its highest slots first. owned maps each primary's ID to its slots.
func PlanMoves(owned map[string][]int, targets []string) []Move {
	want := map[string]int{}
	for i, id := range targets {
		want[id] = Share(i, len(targets)).Last - Share(i, len(targets)).First + 1
	}
	var donors []string
	spare := map[string][]int{}
	for id, slots := range owned {
		if extra := len(slots) - want[id]; extra > 0 {
			s := slices.Sorted(slices.Values(slots))
			spare[id] = s[len(s)-extra:]
			donors = append(donors, id)
		}
	}
	slices.Sort(donors)
	var moves []Move
	for _, to := range targets {
		need := want[to] - len(owned[to])
		for need > 0 && len(donors) > 0 {
			from := donors[0]
			n := min(need, len(spare[from]))
			moves = append(moves, Move{From: from, To: to, Slots: slices.Clone(spare[from][:n])})
			spare[from] = spare[from][n:]
			need -= n
			if len(spare[from]) == 0 {
				donors = donors[1:]
			}
		}
	}
	return moves
}
