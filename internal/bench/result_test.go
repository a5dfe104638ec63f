package bench

import (
	"math"
	"strings"
	"testing"
)

// fullResult is the largest result the API allows: 6 commands (5 plus
// get-during-set) with every figure at an implausibly large value.
func fullResult() Result {
	r := Result{Target: strings.Repeat("t", 52), Mode: "uring-durable", Engine: "uring", Shards: 64, Crash: &CrashResult{Acknowledged: math.MaxInt32, Lost: math.MaxInt32}}
	for _, c := range []string{"set", "hset", "lpush", "incr", "get", "get-during-set"} {
		r.Commands = append(r.Commands, CommandResult{
			Command: c, OpsPerSecond: 12345678.123456789, P50Micros: math.MaxInt32, P99Micros: math.MaxInt32, P999Micros: math.MaxInt32,
			CPUMicrosPerKop: math.MaxInt32, FsyncCount: math.MaxInt64, FsyncP50Micros: math.MaxInt32, FsyncP99Micros: math.MaxInt32, RSSBytes: math.MaxInt64,
			ShardOpsMin: 12345678, ShardOpsMax: 12345678,
		})
	}
	return r
}

func TestTheLargestResultFitsATerminationMessage(t *testing.T) {
	b, err := Encode(fullResult())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxResultBytes/2 {
		t.Errorf("the largest result takes %d bytes; keep it well under the %d-byte termination message", len(b), MaxResultBytes)
	}
	got, err := Decode(string(b)+"\n", fullResult().Target)
	if err != nil {
		t.Fatal(err)
	}
	if got.Commands[5] != fullResult().Commands[5] || *got.Crash != *fullResult().Crash {
		t.Errorf("round trip changed the result: %+v", got)
	}
}

func TestEncodeRefusesWhatWouldBeTruncated(t *testing.T) {
	r := fullResult()
	r.Engine = strings.Repeat("x", MaxResultBytes)
	if _, err := Encode(r); err == nil || !strings.Contains(err.Error(), "more than a termination message holds") {
		t.Errorf("got %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct{ desc, msg, wantErr string }{
		{"log text", "valkey-benchmark: Could not connect", "decoding"},
		{"truncated", `{"target":"a","mode":"none","commands":[{"command":"set","ops":1`, "decoding"},
		{"unknown field", `{"target":"a","mode":"none","commands":[{"command":"set","ops":1}],"extra":1}`, "unknown field"},
		{"two objects", `{"target":"a","mode":"none","commands":[{"command":"set","ops":1}]} {}`, "trailing data"},
		{"other target", `{"target":"b","mode":"none","commands":[{"command":"set","ops":1}]}`, `for target "b", not "a"`},
		{"no commands", `{"target":"a","mode":"none","commands":[]}`, "no commands"},
		{"zero throughput", `{"target":"a","mode":"none","commands":[{"command":"set","ops":0}]}`, "empty measurement"},
	} {
		if _, err := Decode(tc.msg, "a"); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: got %v, want an error containing %q", tc.desc, err, tc.wantErr)
		}
	}
}
