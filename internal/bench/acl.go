package bench

import (
	"slices"
	"strings"
)

// User is the ACL user a runner signs in as on a server that has a
// password: the operator creates it on every such server (with the password
// in the Secret <name>-acl), confined to the keys below and the commands the
// runner and valkey-benchmark send. The database the runner writes to is
// its own by ClaimDatabase, not by the ACL: Valkey 8.1's ACLs cannot name
// databases.
const User = "uringredis-benchmark"

// KeyPatterns are every key a runner writes: valkey-benchmark's for the
// tests a RedisBenchmark can name (set and get: key:*, incr: counter:*,
// lpush: mylist, hset: myhash), the mixed reads' untouched:* (read, never
// written), the crash check's crash:* and the claim on the database. They
// are the benchmark user's key permissions, and what DeleteKeys removes.
var KeyPatterns = []string{"key:*", "counter:*", "mylist", "myhash", "untouched:*", "crash:*", claimKey}

// clusterKeyPatterns are the keys valkey-benchmark --cluster writes besides
// KeyPatterns: it puts a hash tag of the node's slots after each name
// (key:{tag}:__rand_int__, mylist:{tag}), and the names without a
// __rand_int__ get a pattern of their own.
var clusterKeyPatterns = []string{"mylist:*", "myhash:*"}

// ACLRules are the benchmark user's rules, after "user <User> on
// ><password>". Allowed: the connection's handshake (HELLO, SELECT of the
// database, go-redis's CLIENT SETINFO), INFO for the samples, DBSIZE and
// SCAN to find its keys, and the reads and writes of the tests on its own
// keys; DEBUG SEGFAULT only when crashCheck (the instance allows the crash
// check). Refused, among the rest: CONFIG (CONFIG GET shows requirepass),
// FLUSHDB and FLUSHALL (they ignore key permissions), KEYS, scripts.
// valkey-benchmark asks CONFIG GET save and appendonly to print them and
// carries on without ("WARNING: Could not fetch server CONFIG"): that
// refusal is in the server's ACL LOG once per run. On a cluster's servers
// the user may also write clusterKeyPatterns, read the slot map (CLUSTER
// SLOTS) and the state (CLUSTER INFO), follow -ASK redirects (ASKING), and
// never crashes a server: a sharded target has no crash check.
func ACLRules(crashCheck, cluster bool) string {
	rules := []string{"resetkeys"}
	patterns := KeyPatterns
	if cluster {
		patterns = append(slices.Clip(patterns), clusterKeyPatterns...)
	}
	for _, p := range patterns {
		rules = append(rules, "~"+p)
	}
	rules = append(rules, "resetchannels", "-@all",
		"+hello", "+ping", "+select", "+client|setinfo", "+client|setname", "+info", "+dbsize", "+scan",
		"+exists", "+get", "+set", "+incr", "+lpush", "+hset", "+unlink")
	switch {
	case cluster:
		// ASKING: a cluster client follows an -ASK redirect with it while
		// a slot moves (shards added or removed).
		rules = append(rules, "+cluster|slots", "+cluster|info", "+asking")
	case crashCheck:
		rules = append(rules, "+debug|segfault")
	}
	return strings.Join(rules, " ")
}
