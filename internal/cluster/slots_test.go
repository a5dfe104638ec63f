package cluster

import (
	"slices"
	"testing"
)

func TestShare(t *testing.T) {
	for n := 1; n <= 10; n++ {
		next := 0
		for i := range n {
			r := Share(i, n)
			if r.First != next || r.Last < r.First {
				t.Fatalf("Share(%d, %d) = %v after %d", i, n, r, next)
			}
			next = r.Last + 1
		}
		if next != Slots {
			t.Fatalf("the %d shares end at %d", n, next)
		}
	}
	if got := []Range{Share(0, 3), Share(1, 3), Share(2, 3)}; !slices.Equal(got, []Range{{0, 5461}, {5462, 10922}, {10923, 16383}}) {
		t.Errorf("three shares %v", got)
	}
}

func TestFormatSlots(t *testing.T) {
	if got := FormatSlots([]int{0, 1, 2, 5, 7, 8}); got != "0-2 5 7-8" {
		t.Errorf("FormatSlots = %q", got)
	}
}

// A plan leaves every target with its share, moves each slot at most once,
// and no more slots than the imbalance.
func TestPlanMoves(t *testing.T) {
	slotsOf := func(r Range) []int {
		var s []int
		for i := r.First; i <= r.Last; i++ {
			s = append(s, i)
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		owned   map[string][]int
		targets []string
		moved   int
	}{
		{"3 to 4 shards", map[string][]int{"a": slotsOf(Share(0, 3)), "b": slotsOf(Share(1, 3)), "c": slotsOf(Share(2, 3))},
			[]string{"a", "b", "c", "d"}, 4096},
		{"4 to 3 shards", map[string][]int{"a": slotsOf(Share(0, 4)), "b": slotsOf(Share(1, 4)), "c": slotsOf(Share(2, 4)), "d": slotsOf(Share(3, 4))},
			[]string{"a", "b", "c"}, 4096},
		{"balanced", map[string][]int{"a": slotsOf(Share(0, 2)), "b": slotsOf(Share(1, 2))}, []string{"a", "b"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moves := PlanMoves(tc.owned, tc.targets)
			after := map[string][]int{}
			for id, s := range tc.owned {
				after[id] = slices.Clone(s)
			}
			moved := 0
			for _, m := range moves {
				for _, s := range m.Slots {
					i := slices.Index(after[m.From], s)
					if i < 0 {
						t.Fatalf("move %s->%s of slot %d, which %s does not hold", m.From, m.To, s, m.From)
					}
					after[m.From] = slices.Delete(after[m.From], i, i+1)
					after[m.To] = append(after[m.To], s)
					moved++
				}
			}
			if moved != tc.moved {
				t.Errorf("moved %d slots, want %d", moved, tc.moved)
			}
			total := 0
			for i, id := range tc.targets {
				r := Share(i, len(tc.targets))
				if len(after[id]) != r.Last-r.First+1 {
					t.Errorf("%s holds %d slots, want %d", id, len(after[id]), r.Last-r.First+1)
				}
				total += len(after[id])
			}
			if total != Slots {
				t.Errorf("the targets hold %d slots together", total)
			}
		})
	}
}

// ParseNodes reads the fields of CLUSTER NODES the admin uses, slots being
// moved included (as the format documents them: [slot->-id], [slot-<-id]).
func TestParseNodes(t *testing.T) {
	nodes, err := ParseNodes("a1 10.0.0.1:6379@16379,cache-s0-0 myself,master - 0 0 1 connected 0-5 7 [8->-b2]\n" +
		"b2 10.0.0.2:6379@16379 master - 0 0 2 connected 9-10 [8-<-a1]\n" +
		"c3 10.0.0.3:6379@16379 slave,fail? a1 0 0 1 connected\n")
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	if a.ID != "a1" || a.Addr != "10.0.0.1:6379" || a.Bus != 16379 || !a.Myself || !a.Primary || FormatSlots(a.Slots) != "0-5 7" || a.Migrating[8] != "b2" {
		t.Errorf("a1: %+v", a)
	}
	if b.Myself || FormatSlots(b.Slots) != "9-10" || b.Importing[8] != "a1" {
		t.Errorf("b2: %+v", b)
	}
	if c.Primary || c.PrimaryID != "a1" || !c.Failing || len(c.Slots) != 0 {
		t.Errorf("c3: %+v", c)
	}
	if _, err := ParseNodes("a1 10.0.0.1:6379"); err == nil {
		t.Error("a short line parsed")
	}
}
