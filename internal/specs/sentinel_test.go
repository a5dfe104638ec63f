package specs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// failoverHarness runs a three-server, three-Sentinel instance from the start
// scripts in a network namespace of its own, where /etc/hosts gives every pod
// name of the headless domain an address of its own on the loopback, then
// loses the primary with its volume: the Sentinels must promote a replica,
// and the old primary come back as a replica of it instead of as an empty
// primary. With SENTINELS_AWAY set, every Sentinel is lost too while the
// primary comes back, and returns only after a while.
const failoverHarness = harnessPrelude + `replicas_seen() { # sentinel, count: the Sentinel sees that many healthy replicas
  [ "$(cli -h cache-sentinel-$1.$D -p 26379 SENTINEL replicas cache | awk 'prev == "flags" && $0 == "slave" { n++ } { prev = $0 } END { print n + 0 }')" = "$2" ]
}
server() { POD_NAME=cache-$1 sh "$W/server-$1.sh" >>"$W/server-$1.log" 2>&1 & echo $! >"$W/server-$1.pid"; }
sentinel() { POD_NAME=cache-sentinel-$1 sh "$W/sentinel-$1.sh" >>"$W/sentinel-$1.log" 2>&1 & echo $! >"$W/sentinel-$1.pid"; }
primary_of() { cli -h cache-sentinel-$1.$D -p 26379 SENTINEL get-master-addr-by-name cache | head -n 1; }

for i in 0 1 2; do sentinel $i; done
# OrderedReady: each server starts once the one before it answers.
for i in 0 1 2; do server $i; until_ok 60 pong cache-$i.$D 6379; done
until_ok 60 linked cache-1.$D
until_ok 60 linked cache-2.$D
for i in 0 1 2; do until_ok 90 replicas_seen $i 2; done
echo "bootstrap primary: $(primary_of 0) $(primary_of 1) $(primary_of 2)"

i=0; while [ $i -lt 100 ]; do echo "SET key:$i $i"; i=$((i + 1)); done | cli -h cache-0.$D >/dev/null
echo "acknowledged by replicas: $(cli -h cache-0.$D WAIT 2 5000)"

# The node and its disk are lost: the server dies and comes back on an empty volume.
kill -9 "$(cat "$W/server-0.pid")"
rm -rf "$W/data-0"/*
if [ -n "${SENTINELS_AWAY:-}" ]; then
  for i in 0 1 2; do kill -9 "$(cat "$W/sentinel-$i.pid")"; done
  server 0
  sleep 6
  echo "the old primary while the Sentinels are away: $(cli -h cache-0.$D ping 2>&1 | head -n 1)"
  echo "keys on a replica while the Sentinels are away: $(cli -h cache-1.$D DBSIZE)"
  for i in 0 1 2; do sentinel $i; done
else
  server 0
fi
promoted() { p=$(primary_of 0); [ -n "$p" ] && [ "$p" != cache-0.$D ]; }
until_ok 120 promoted
until_ok 60 pong cache-0.$D 6379
until_ok 60 linked cache-0.$D
new=$(primary_of 0)
echo "promoted: $new $(primary_of 1) $(primary_of 2)"
echo "keys on the new primary: $(cli -h "$new" DBSIZE)"
echo "keys on the old primary: $(cli -h cache-0.$D DBSIZE)"
echo "role of the old primary: $(cli -h cache-0.$D INFO replication | grep '^role:' | tr -d '\r')"
`

// harnessPrelude begins both namespace harnesses: the loopback up, the
// test's /etc/hosts bound over the namespace's, and the shell helpers they
// share.
const harnessPrelude = `set -eu
ip link set lo up
mount --bind "$W/hosts" /etc/hosts
export PATH="$BIN:$PATH"
D=cache-headless.apps.svc
cli() { valkey-cli --no-auth-warning -t 1 "$@"; }
until_ok() { # tries, command...
  n=$1; shift
  while ! "$@" >/dev/null 2>&1; do
    n=$((n - 1)); [ "$n" -gt 0 ] || { echo "gave up on: $*"; return 1; }
    sleep 0.5
  done
}
pong() { cli -h "$1" -p "$2" ping | grep -qx PONG; }
linked() { cli -h "$1" INFO replication | grep -q '^master_link_status:up'; }
`

// needRoot skips a test that runs a harness in a namespace of its own.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the harness runs in a network and mount namespace of its own (unshare --net --mount)")
	}
}

// TestStartScriptsFailOver runs the start scripts with the environment the
// StatefulSets give them, paths moved into the test's directory: the primary
// comes back on an empty volume while the Sentinels run, and while none
// does.
func TestStartScriptsFailOver(t *testing.T) {
	needRoot(t)
	t.Run("sentinels-up", func(t *testing.T) { runFailoverHarness(t, false) })
	// An empty ordinal 0 that no Sentinel answers used to start as the
	// primary, and its replicas copied the empty dataset.
	t.Run("sentinels-away", func(t *testing.T) { runFailoverHarness(t, true) })
}

func runFailoverHarness(t *testing.T, sentinelsAway bool) {
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	password := `pass"word\with quotes`
	w := t.TempDir()
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	for i := range 3 {
		fmt.Fprintf(&hosts, "127.0.0.1%d cache-%d.cache-headless.apps.svc\n127.0.0.2%d cache-sentinel-%d.cache-headless.apps.svc\n", i, i, i, i)
	}
	writePodFiles(t, w, rp, password, hosts.String(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := harnessCommand(ctx, w, password, failoverHarness)
	if sentinelsAway {
		cmd.Env = append(cmd.Env, "SENTINELS_AWAY=1")
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("harness (%s):\n%s", time.Since(start).Round(time.Second), out)
	logs := func() {
		for _, name := range []string{"server-0", "server-1", "server-2", "sentinel-0"} {
			b, _ := os.ReadFile(filepath.Join(w, name+".log"))
			t.Logf("%s.log:\n%s", name, b)
		}
	}
	if err != nil {
		logs()
		t.Fatalf("harness: %v", err)
	}
	wants := []string{
		"bootstrap primary: cache-0.cache-headless.apps.svc cache-0.cache-headless.apps.svc cache-0.cache-headless.apps.svc",
		"acknowledged by replicas: 2",
		"keys on the new primary: 100",
		"keys on the old primary: 100",
		"role of the old primary: role:slave",
	}
	why := "its volume holds no data and a replica does: waiting"
	if sentinelsAway {
		wants = append(wants,
			"the old primary while the Sentinels are away: Could not connect to Valkey at cache-0.cache-headless.apps.svc:6379: Connection refused",
			"keys on a replica while the Sentinels are away: 100")
		why = "its volume holds no data and cache-1.cache-headless.apps.svc, a replica, does (no Sentinel knows a healthy one): waiting"
	}
	for _, want := range wants {
		if !strings.Contains(string(out), want+"\n") {
			logs()
			t.Errorf("the harness did not print %q", want)
		}
	}
	restarted, _ := os.ReadFile(filepath.Join(w, "server-0.log"))
	if !strings.Contains(string(restarted), why) {
		t.Errorf("the primary restarted on an empty volume did not wait for the failover:\n%s", restarted)
	}
}

// peersHarness: the start scripts find the servers by their names, with no
// server count in their environment. Ordinals 1, 2 and 4 are away (their
// names do not resolve), ordinal 5 resolves but does not listen (a pod whose
// server is not up), no Sentinel answers, and ordinal 3 is the primary,
// holding data. Ordinal 0 starts on an empty volume and a new Sentinel
// starts: both must find ordinal 3 beyond the gap.
const peersHarness = harnessPrelude + `
# Ordinal 3 runs from the configuration of ordinal 1 of the files (its
# address moved), as the primary.
sed 's/^bind 127.0.0.11$/bind 127.0.0.13/' "$W/redis-1.conf" >"$W/redis-3.conf"
valkey-server "$W/redis-3.conf" --include /dev/null >"$W/server-3.log" 2>&1 &
until_ok 60 pong cache-3.$D 6379
cli -h cache-3.$D SET key:before-the-gap 1 >/dev/null

start=$(date +%s)
POD_NAME=cache-0 sh "$W/server-0.sh" >"$W/server-0.log" 2>&1 &
until_ok 60 linked cache-0.$D
echo "ordinal 0 replicates: $(cli -h cache-0.$D INFO replication | grep '^master_host:' | tr -d '\r')"
echo "ordinal 0 holds: $(cli -h cache-0.$D GET key:before-the-gap)"
echo "ordinal 0 started within: $(( $(date +%s) - start ))s"

POD_NAME=cache-sentinel-0 sh "$W/sentinel-0.sh" >"$W/sentinel-0.log" 2>&1 &
until_ok 60 pong cache-sentinel-0.$D 26379
echo "the Sentinel monitors: $(cli -h cache-sentinel-0.$D -p 26379 SENTINEL get-master-addr-by-name cache | head -n 1)"
`

// TestStartScriptsFindServersByName: the start scripts look for the other
// servers at every ordinal spec.replicas allows, not at the first n, so a
// server count need not be in the pod template (where a scale would
// restart every pod). With a server count of 3 in the environment, as the
// pods had before, ordinal 0 started as a second, empty primary here.
func TestStartScriptsFindServersByName(t *testing.T) {
	needRoot(t)
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	password := "peers"
	w := t.TempDir()
	hosts := "127.0.0.1 localhost\n" +
		"127.0.0.10 cache-0.cache-headless.apps.svc\n127.0.0.13 cache-3.cache-headless.apps.svc\n127.0.0.15 cache-5.cache-headless.apps.svc\n" +
		"127.0.0.20 cache-sentinel-0.cache-headless.apps.svc\n"
	writePodFiles(t, w, rp, password, hosts, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := harnessCommand(ctx, w, password, peersHarness).CombinedOutput()
	t.Logf("harness:\n%s", out)
	logs := func() {
		for _, name := range []string{"server-0", "server-3", "sentinel-0"} {
			b, _ := os.ReadFile(filepath.Join(w, name+".log"))
			t.Logf("%s.log:\n%s", name, b)
		}
	}
	if err != nil {
		logs()
		t.Fatalf("harness: %v", err)
	}
	for _, want := range []string{
		"ordinal 0 replicates: master_host:cache-3.cache-headless.apps.svc",
		"ordinal 0 holds: 1",
		"the Sentinel monitors: cache-3.cache-headless.apps.svc",
	} {
		if !strings.Contains(string(out), want+"\n") {
			logs()
			t.Errorf("the harness did not print %q", want)
		}
	}
	// Looking at every ordinal costs DNS answers, not connection timeouts:
	// only the Sentinels that do not answer (three, a second each at most)
	// and ordinal 5, which refuses at once, are asked.
	var took int
	if _, err := fmt.Sscanf(string(out[strings.Index(string(out), "ordinal 0 started within: ")+len("ordinal 0 started within: "):]), "%ds", &took); err != nil || took > 8 {
		t.Errorf("ordinal 0 took %ds to start (%v)", took, err)
	}
}

// TestMaxServersIsTheAPIMaximum: the start scripts look for servers at the
// ordinals below specs.MaxServers; a server beyond it would be missed.
func TestMaxServersIsTheAPIMaximum(t *testing.T) {
	b, err := os.ReadFile("../../config/crd/bases/persistence.uringredis.io_redispersistences.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	replicas := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicas"]
	if replicas.Maximum == nil || int(*replicas.Maximum) != specs.MaxServers {
		t.Errorf("spec.replicas allows at most %v servers; specs.MaxServers is %d", replicas.Maximum, specs.MaxServers)
	}
}

// writePodFiles writes into w the hosts file and, for ordinals 0 to n-1, what
// the pods of rp's servers and Sentinels start from, with the environment
// the StatefulSets give them and paths moved into w: redis-<i>.conf (bound
// to 127.0.0.1<i>, its data in data-<i>), server-<i>.sh and sentinel-<i>.sh
// (bound to 127.0.0.2<i>, its directory sentinel-<i>).
func writePodFiles(t *testing.T, w string, rp *v1alpha1.RedisPersistence, password, hosts string, n int) {
	t.Helper()
	files := map[string]string{"hosts": hosts}
	escaped := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(password)
	in := specs.NewPodInputs(rp, password)
	servers, sentinels := specs.StatefulSet(rp, specstest.Options, in), specs.SentinelStatefulSet(rp, specstest.Options, in)
	for i := range n {
		data := filepath.Join(w, fmt.Sprintf("data-%d", i))
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		// What the prepare container and the pod's mounts provide, moved
		// into the test's directory; every server binds its own address.
		conf := strings.NewReplacer(
			"bind * -::*", fmt.Sprintf("bind 127.0.0.1%d", i),
			"dir "+specs.DataDir, "dir "+data,
			"include "+specs.RunDir+"/auth.conf", fmt.Sprintf("requirepass \"%s\"\nprimaryauth \"%s\"", escaped, escaped),
		).Replace(specs.RenderConfig(rp))
		files[fmt.Sprintf("redis-%d.conf", i)] = conf
		files[fmt.Sprintf("server-%d.sh", i)] = exports(specstest.ContainerNamed(t, servers, specs.ContainerRedis).Env, map[string]string{
			"CONFIG_FILE":   filepath.Join(w, fmt.Sprintf("redis-%d.conf", i)),
			"USERS_INCLUDE": "/dev/null",
			"DATA_DIR":      data,
		}) + specs.ServerStartScript
		sentinelDirOf := filepath.Join(w, fmt.Sprintf("sentinel-%d", i))
		if err := os.Mkdir(sentinelDirOf, 0o700); err != nil {
			t.Fatal(err)
		}
		files[fmt.Sprintf("sentinel-%d.sh", i)] = exports(specstest.ContainerNamed(t, sentinels, specs.ContainerSentinel).Env, map[string]string{
			"SENTINEL_DIR":    sentinelDirOf,
			"SENTINEL_LISTEN": fmt.Sprintf("bind 127.0.0.2%d\n%s", i, specs.SentinelListenConfig(rp)),
		}) + specs.SentinelStartScript
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(w, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// harnessCommand runs harness in a network, mount and PID namespace of its
// own, with W, BIN and the password in its environment. The namespace's
// processes die with the harness: nothing outlives the network namespace.
func harnessCommand(ctx context.Context, w, password, harness string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "bash", "-c", harness)
	cmd.Env = append(os.Environ(), "W="+w, "BIN="+filepath.Dir(testenv.ServerBin()), "REDISCLI_AUTH="+password, "REDIS_PASSWORD="+password)
	return cmd
}

// exports are the shell lines that export env's values, those override names
// replaced; values from the pod's fields or from Secrets are the caller's to
// set.
func exports(env []corev1.EnvVar, override map[string]string) string {
	var b strings.Builder
	for _, e := range env {
		if e.ValueFrom != nil {
			continue
		}
		value, ok := override[e.Name]
		if !ok {
			value = e.Value
		}
		fmt.Fprintf(&b, "export %s='%s'\n", e.Name, strings.ReplaceAll(value, "'", `'\''`))
	}
	return b.String()
}
