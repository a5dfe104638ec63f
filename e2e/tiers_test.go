package e2e

// The suite's two tiers (no build tag: `make test` checks the table against
// the scenarios without a cluster, see TestEveryScenarioDeclaresItsTier).
//
// `make e2e` runs the full tier: every scenario, whole. `.ci/run` runs the ci
// tier (`E2E_TIER=ci`), chosen by what each scenario alone covers on a real
// cluster: every feature at least once. A scenario that only re-checks code
// paths another one (or envtest against the real server) already covers runs
// in the full tier only, and its reason is written here; a ci scenario may
// have a shorter ci form that leaves out such a re-check, written here too,
// and asks for it with ciForm. A new scenario declares its tier here: the
// check fails on a Test function this table does not name.

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

type tier string

const (
	tierCI   tier = "ci"
	tierFull tier = "full"
)

type scenario struct {
	// tier is the lowest tier that runs the scenario: a ci scenario runs in
	// both tiers, a full one in the full tier only.
	tier tier
	// covers is what the scenario checks that no ci scenario before it does.
	covers string
	// ciOmits, for a ci scenario with a shorter ci form, is what that form
	// leaves out, and where the ci tier covers it instead.
	ciOmits string
	// reason, for a full scenario, is why the ci tier does without it.
	reason string
}

var scenarios = map[string]scenario{
	"TestApplicationScalesOut": {tier: tierCI,
		covers:  "placement, pod metadata, priority class, a NodePort Service; an app pod's envFrom connection Secret; kubectl scale 1 -> 3 through the scale subresource; the Sentinels answer an app",
		ciOmits: "the primary's pod deleted without grace and the options checked on its replacement: a lost primary is TestReplicasFailOver's, the options are checked on the first pods"},
	"TestBackupToObjectStore": {tier: tierCI,
		covers: "a RedisBackup to a real S3 store (SeaweedFS) with SSE, the object's SHA-256 and content restored into a server pod; bad credentials fail the backup, not the instance"},
	"TestRestoreFromBackup": {tier: tierCI,
		covers: "disaster recovery from the bucket alone: bootstrap.recovery.storedBackup and a point-in-time recovery of the archive, each in a new namespace that never held the instance or its RedisBackups"},
	"TestVerifiedBackup": {tier: tierFull,
		covers: "spec.backup.verify on a real cluster: the newest backup restored into <name>-verify from the real store, Verified with every key and the sample, the temporary instance and its claim deleted; a replaced snapshot fails the next run",
		reason: "two verification runs on schedule (about six minutes) where ci is near its time budget; the restore path is TestRestoreFromBackup's, and the verifier with the real agent, server and SeaweedFS is controllers.TestVerifiedBackups"},
	"TestBenchmarkComparesModes": {tier: tierCI,
		covers: "the product's comparison: a RedisBenchmark Job across the modes with the crash check, as the benchmark's ACL user"},
	"TestDefaultInstanceIsClosed": {tier: tierCI,
		covers: "an instance without spec.auth refuses clients without the generated password; its NetworkPolicy against the live pods"},
	"TestPodSecurityLevels": {tier: tierCI,
		covers: "Pod Security restricted in the suite's and the release's namespaces; the node agents' privileged namespace"},
	"TestOperatorMetricsNeedAToken": {tier: tierCI,
		covers: "the operator's HTTPS metrics behind authentication and authorization"},
	"TestModeChangesKeepTheData": {tier: tierCI,
		covers:  "mode changes of a running instance through the operator, the keys of every step kept",
		ciOmits: "the tour of all twelve ordered mode pairs: the ci form changes rdb -> aof -> uring -> rdb; every pair runs on the real server in envtest (controllers.TestModeChangesCarryTheData)"},
	"TestAuthInstanceDoesNotStallOthers": {tier: tierFull,
		covers: "an instance with a password does not hold up twelve created after it; its password rotated on the running pod",
		reason: "a regression test of the work queue with thirteen instances: the default password's rotation without a restart is controllers.TestDefaultPasswordRotates (real servers and Sentinel), a rotated Secret reaching a running pod TestApplicationUserRotates"},
	"TestNoneSampleRunsWithoutAClaim": {tier: tierCI,
		covers: "mode none's sample runs without a PersistentVolumeClaim"},
	"TestCrashReported": {tier: tierCI,
		covers: "a server's SIGSEGV reported as Degraded and a Restarted event"},
	"TestTuningWithoutRestart": {tier: tierCI,
		covers: "the queue depth changed by CONFIG SET on the running pod"},
	"TestEveryModeBecomesReady": {tier: tierCI,
		covers: "every mode Ready on ext4 with its engine, io_uring active where asked"},
	"TestUringPodRunsUnderLocalhostSeccomp": {tier: tierCI,
		covers: "the chart's seccomp profile installed on the node and io_uring running under it"},
	"TestDataSurvivesPodDeletion": {tier: tierCI,
		covers:  "a pod deleted and its replacement started on the same volume with every key",
		ciOmits: "aof always (the stock server's restart path, which TestModeChangesKeepTheData's aof step also restarts): the ci form deletes the uring durable pod"},
	"TestModeChangeRollsThePod": {tier: tierCI,
		covers: "a mode change rolls the pod to the new mode"},
	"TestInvalidSpecRejected": {tier: tierCI,
		covers: "the API server refuses an invalid RedisPersistence with a message"},
	"TestNoEligibleNode": {tier: tierCI,
		covers: "an instance no node can run says so"},
	"TestFallbackUnderDenyingProfile": {tier: tierCI,
		covers: "io_uring refused by a seccomp profile: the server falls back and the status says why"},
	"TestOperatorLifecycle": {tier: tierCI,
		covers: "helm upgrade from the previous release, instances rolled one at a time, helm uninstall keeping CRDs and data, install.yaml, helm install again"},
	"TestReplicasFailOver": {tier: tierCI,
		covers: "a primary and its claim lost while the operator restarts: the Sentinels promote, the operator labels, the Service follows, the lost server rejoins"},
	"TestPluginOnAReplicatedInstance": {tier: tierCI,
		covers: "kubectl uring on a real cluster: cli through the kubelet's exec on the primary, a replica and a Sentinel with the pod's password; report with every pod's INFO; a switchover asked for, through Sentinels that name the servers by host name"},
	"TestBenchmarkCostOfAckReplicas": {tier: tierFull,
		covers: "a RedisBenchmark of ackReplicas 0 against 1 with the crash check",
		reason: "a measurement, printed not asserted: ackReplicas' guarantee runs in the ci tier in TestShardedClusterFailsOverAndScales and the crash check in TestBenchmarkComparesModes"},
	"TestNodeLost": {tier: tierFull,
		covers: "a whole node stopped: promotion, and the node's server rejoining",
		reason: "it needs the multi-node kind cluster (E2E_CLUSTER=kind); .ci/run's offline cluster has one node"},
	"TestShardedClusterFailsOverAndScales": {tier: tierCI,
		covers:  "a sharded instance forms by itself, a shard's primary killed: its replica takes over, every key kept with its TTL; every pod deleted at once: the operator introduces the nodes at their new IPs",
		ciOmits: "3 -> 4 -> 3 shards under a writer: slots moving with their keys run against real servers in internal/cluster.TestClusterScalesWithItsKeys and controllers.TestClusterFormsAndScales"},
	"TestStorageMeasuredAndUnsafeVolumeFlagged": {tier: tierCI,
		covers: "status.storage from the prepare container; a volume without write barriers flagged"},
	"TestTLSInstance": {tier: tierCI,
		covers: "spec.tls with client certificates; a new certificate served without a restart"},
	"TestApplicationUserRotates": {tier: tierCI,
		covers: "spec.users with key rules; a user's rotated Secret reaches the running pod within its grace period"},
	"TestWatchNamespacesConfinesTheOperator": {tier: tierCI,
		covers: "the chart's watchNamespaces confine the operator's RBAC and its reconciles"},
	"TestBackupCost": {tier: tierFull,
		covers: "what back-to-back backups cost a running server",
		reason: "a measurement of minutes: it runs with make bench-backup (E2E_BACKUP_COST=1)"},
	"TestWriteAvailabilityThroughDay2": {tier: tierFull,
		covers: "write availability through day-2 operations (scale 2 -> 3 -> 2, an operator upgrade, an image change, a startup option change) as a steady writer sees it, the table in docs/replication.md",
		reason: "a measurement (make e2e-availability): its checks, nothing acknowledged lost and a scale that replaces no pod, are controllers.TestScaleRestartsNothing's and TestRolloutSwitchesOverBeforeThePrimaryRestarts's with real servers and Sentinels"},
	"TestWriteAvailabilityThroughShardChanges": {tier: tierFull,
		covers: "write availability through shards 3 -> 4 -> 3 and a rolling change of a sharded instance as a steady cluster client sees it, the table in docs/replication.md",
		reason: "a measurement (make e2e-availability): TestShardedClusterFailsOverAndScales checks the same changes with a writer that must see no error"},
	"TestClusterScaleOut": {tier: tierFull,
		covers: "one server against a 3-shard cluster in one RedisBenchmark",
		reason: "a measurement of minutes: it runs with make bench-cluster (E2E_CLUSTER_BENCH=1)"},
	"TestUpgradeFromRelease": {tier: tierFull,
		covers: "helm upgrade from the release users run, built from its commit",
		reason: "it needs a cluster without the operator and a second tree's images: it runs with make e2e-upgrade"},
}

// suiteTier is the tier E2E_TIER names: full when unset.
func suiteTier() (tier, error) {
	switch t := tier(os.Getenv("E2E_TIER")); t {
	case "", tierFull:
		return tierFull, nil
	case tierCI:
		return tierCI, nil
	default:
		return "", fmt.Errorf("E2E_TIER=%s: want %s or %s", t, tierCI, tierFull)
	}
}

// fullOnly lists the scenarios the ci tier leaves out, with their reasons,
// and the -test.skip pattern that leaves them out.
func fullOnly() (lines []string, skip string) {
	var names []string
	for name, s := range scenarios {
		if s.tier == tierFull {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		lines = append(lines, fmt.Sprintf("%s runs in the full tier only: %s", name, scenarios[name].reason))
	}
	return lines, "^(" + strings.Join(names, "|") + ")$"
}

// ciForm reports whether the running scenario takes its shorter ci form,
// and logs what that form leaves out.
func ciForm(t *testing.T) bool {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	s, ok := scenarios[name]
	if !ok || s.ciOmits == "" {
		t.Fatalf("%s asks for its ci form, but the tier table gives it none", name)
	}
	if current, _ := suiteTier(); current != tierCI {
		return false
	}
	t.Logf("ci tier leaves out %s", s.ciOmits)
	return true
}

var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\) \{$`)

// TestEveryScenarioDeclaresItsTier reads the suite's files: every scenario
// is in the table, every entry a scenario, every full one has its reason,
// and a ci form is described exactly where a scenario asks for it.
func TestEveryScenarioDeclaresItsTier(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), "_test.go") || f.Name() == "tiers_test.go" {
			continue
		}
		src, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		bodies := testFunc.FindAllSubmatchIndex(src, -1)
		for i, m := range bodies {
			name := string(src[m[2]:m[3]])
			end := len(src)
			if i+1 < len(bodies) {
				end = bodies[i+1][0]
			}
			seen[name] = true
			s, ok := scenarios[name]
			switch {
			case !ok:
				t.Errorf("%s (%s) declares no tier: add it to scenarios in tiers_test.go", name, f.Name())
				continue
			case s.covers == "":
				t.Errorf("%s: say what it covers", name)
			case s.tier == tierFull && (s.reason == "" || s.ciOmits != ""):
				t.Errorf("%s runs in the full tier only: it needs a reason and no ci form", name)
			case s.tier == tierCI && s.reason != "":
				t.Errorf("%s runs in the ci tier: a reason to leave it out makes no sense", name)
			case s.tier != tierCI && s.tier != tierFull:
				t.Errorf("%s: tier %q", name, s.tier)
			}
			asks := strings.Contains(string(src[m[1]:end]), "ciForm(t)")
			if asks != (s.ciOmits != "") {
				t.Errorf("%s: calls ciForm %v, but the table describes a ci form %v", name, asks, s.ciOmits != "")
			}
		}
	}
	for name := range scenarios {
		if !seen[name] {
			t.Errorf("the tier table names %s, which no file of the suite defines", name)
		}
	}
	if len(seen) < 20 {
		t.Fatalf("found %d scenarios: the pattern no longer matches the suite's files", len(seen))
	}
}
