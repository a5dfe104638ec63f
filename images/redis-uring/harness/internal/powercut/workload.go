package powercut

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/resp"
)

// kind is one way of writing a key. Every path that makes a write visible or
// acknowledges it differently gets a kind: a durable server must gate each of
// them (a plain reply, a script's, EXEC's, a write into another db, an
// effect propagated to the AOF only).
type kind struct {
	name string
	// db0, db1: where the key lives once the write is done. A key restored
	// in only some of them is a unit half-applied: corruption.
	db0, db1 bool
	commands func(key, value string) [][]string
	// ack is the reply of the last command: the one that acknowledges.
	ack any
	// ttl: the write gives the key a time to live (an hour, far beyond a
	// trial). A key restored without one is a write half-applied.
	ttl bool
}

// keyTTL is the time to live the ttl kinds give their keys, in seconds.
const keyTTL = "3600"

// Scripts use the redis.* names, which Valkey keeps as aliases of server.*,
// so a stock Redis runs the same workload.
const (
	setScript = "return redis.call('set', KEYS[1], ARGV[1])"
	// AOF-only propagation: the effect feeds the AOF and no replica, so a
	// gate that waited on the replication offset would never see it.
	setAOFOnlyScript = "redis.set_repl(redis.REPL_AOF); return redis.call('set', KEYS[1], ARGV[1])"
	// SELECT inside a script changes the script's db only.
	setDB1Script = "redis.call('select', 1); return redis.call('set', KEYS[1], ARGV[1])"
)

// kinds are cycled through by key index: key i of every writer is written
// with kinds[i%len(kinds)], so verify knows where each key must be.
var kinds = []kind{
	{name: "set", db0: true, ack: "OK", commands: func(k, v string) [][]string {
		return [][]string{{"SET", k, v}}
	}},
	{name: "eval", db0: true, ack: "OK", commands: func(k, v string) [][]string {
		return [][]string{{"EVAL", setScript, "1", k, v}}
	}},
	{name: "eval-aof-only", db0: true, ack: "OK", commands: func(k, v string) [][]string {
		return [][]string{{"EVAL", setAOFOnlyScript, "1", k, v}}
	}},
	{name: "eval-select", db1: true, ack: "OK", commands: func(k, v string) [][]string {
		return [][]string{{"EVAL", setDB1Script, "1", k, v}}
	}},
	{name: "multi", db0: true, ack: []any{"OK"}, commands: func(k, v string) [][]string {
		return [][]string{{"MULTI"}, {"SET", k, v}, {"EXEC"}}
	}},
	{name: "multi-move", db1: true, ack: []any{"OK", int64(1)}, commands: func(k, v string) [][]string {
		return [][]string{{"MULTI"}, {"SET", k, v}, {"MOVE", k, "1"}, {"EXEC"}}
	}},
	{name: "multi-copy", db0: true, db1: true, ack: []any{"OK", int64(1)}, commands: func(k, v string) [][]string {
		return [][]string{{"MULTI"}, {"SET", k, v}, {"COPY", k, k, "DB", "1"}, {"EXEC"}}
	}},
	// Writes with a time to live: the AOF records them with an absolute
	// expiry (SET ... PXAT), the durable gate holds them like any other.
	{name: "set-ex", db0: true, ttl: true, ack: "OK", commands: func(k, v string) [][]string {
		return [][]string{{"SET", k, v, "EX", keyTTL}}
	}},
	{name: "multi-expire", db0: true, ttl: true, ack: []any{"OK", int64(1)}, commands: func(k, v string) [][]string {
		return [][]string{{"MULTI"}, {"SET", k, v}, {"EXPIRE", k, keyTTL}, {"EXEC"}}
	}},
}

// KindNames lists the write kinds in the order writers cycle through them.
func KindNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return names
}

func kindOf(i int) kind { return kinds[i%len(kinds)] }

// kindOf is the kind of key i in this configuration's trials. A failover
// trial writes the AOF-only script's keys with the plain script instead:
// a primary with aof-uring-ack-replicas refuses to keep a write off the
// replicas (server.set_repl without REPL_REPLICA), so such a write cannot
// be acknowledged and the kind has nothing to check there.
func (c Config) kindOf(i int) kind {
	k := kindOf(i)
	if c.Replica && k.name == "eval-aof-only" {
		return kinds[1]
	}
	return k
}

// observedDB is the db a reader GETs a key of kind k from: the cross-db
// target when there is one.
func (k kind) observedDB() int {
	if k.db1 {
		return 1
	}
	return 0
}

// dbs names the dbs the key lives in once written: "0", "1" or "0,1".
func (k kind) dbs() string {
	var dbs []string
	if k.db0 {
		dbs = append(dbs, "0")
	}
	if k.db1 {
		dbs = append(dbs, "1")
	}
	return strings.Join(dbs, ",")
}

// restored classifies a key after the restart from its presence (with the
// value written) in db 0 and db 1: present in every db of its kind, missing
// from all, or neither (torn).
func (k kind) restored(in0, in1 bool) (present, torn bool) {
	switch {
	case in0 == k.db0 && in1 == k.db1:
		return true, false
	case !in0 && !in1:
		return false, false
	}
	return false, true
}

// write pipelines the kind's commands and checks the acknowledging reply.
// Any error reply ends the write: the caller stops writing.
func (k kind) write(c *resp.Conn, key, value string) error {
	cmds := k.commands(key, value)
	for _, cmd := range cmds {
		c.Send(cmd...)
	}
	if err := c.Flush(); err != nil {
		return err
	}
	var last any
	for range cmds {
		v, err := c.Receive()
		if err != nil {
			return err
		}
		last = v
	}
	if !reflect.DeepEqual(last, k.ack) {
		return fmt.Errorf("%s %s: replied %v, want %v", k.name, key, last, k.ack)
	}
	return nil
}

// KindCounts are one kind's figures in a trial.
type KindCounts struct {
	Acked int `json:"acked"`
	Lost  int `json:"lost"`
	// Observed: seen by a GET in flight; Notified: named by a keyspace
	// notification the subscriber received.
	Observed int `json:"observed"`
	Notified int `json:"notified"`
}

func (c *KindCounts) add(o KindCounts) {
	c.Acked += o.Acked
	c.Lost += o.Lost
	c.Observed += o.Observed
	c.Notified += o.Notified
}

// notifyEvents enables the keyspace channel for string commands ($: SET) and
// generic ones (g: MOVE's move_from/move_to, COPY's copy_to).
const notifyEvents = "K$g"

// notifyPatterns are the keyspace channels of the workload's keys in both dbs.
var notifyPatterns = []string{"__keyspace@0__:pc:*", "__keyspace@1__:pc:*"}

// parseNotification reads a message pushed to a PSUBSCRIBEd connection:
// ["pmessage", pattern, "__keyspace@<db>__:<key>", event].
func parseNotification(v any) (db int, key, event string, ok bool) {
	msg, isArr := v.([]any)
	if !isArr || len(msg) != 4 || msg[0] != "pmessage" {
		return 0, "", "", false
	}
	channel, okC := msg[2].(string)
	event, okE := msg[3].(string)
	if !okC || !okE {
		return 0, "", "", false
	}
	rest, found := strings.CutPrefix(channel, "__keyspace@")
	if !found {
		return 0, "", "", false
	}
	dbStr, key, found := strings.Cut(rest, "__:")
	if !found {
		return 0, "", "", false
	}
	db, err := strconv.Atoi(dbStr)
	if err != nil {
		return 0, "", "", false
	}
	return db, key, event, true
}

// parseKey is the inverse of key: "pc:<writer>:<index>".
func parseKey(s string) (w, i int, ok bool) {
	rest, found := strings.CutPrefix(s, "pc:")
	if !found {
		return 0, 0, false
	}
	ws, is, found := strings.Cut(rest, ":")
	if !found {
		return 0, 0, false
	}
	w, errW := strconv.Atoi(ws)
	i, errI := strconv.Atoi(is)
	if errW != nil || errI != nil || w < 0 || i < 0 {
		return 0, 0, false
	}
	return w, i, true
}
