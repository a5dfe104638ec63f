//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// What an application team does with an instance, on one instance that
// carries every pod and Service option: read how to connect from the
// connection Secret, grow it with kubectl scale, reach it through a node
// port.

// The pod and Service options the instance of TestApplicationScalesOut
// carries, as a user would set them.
var (
	appPodLabels          = map[string]v1alpha1.LabelValue{"example.com/team": "checkout"}
	appPodAnnotations     = map[string]v1alpha1.AnnotationValue{"example.com/owner": "e2e"}
	appServiceAnnotations = map[string]v1alpha1.AnnotationValue{"example.com/exposed-by": "e2e"}
)

const sentinelPort = 26379

// appPriority is the value of the PriorityClass the instance names: the
// API server's Priority admission writes it into every pod that names the
// class, so a pod carrying it was admitted with the class.
const appPriority = 1000

// TestApplicationScalesOut: a one-server uring durable instance with
// topologySpreadConstraints (no labelSelector), a priorityClassName,
// podMetadata and a NodePort Service with annotations becomes Ready on the
// real scheduler and kubelet, its pod carrying the labels, annotations,
// priority and the spread constraint with the instance's selector, its
// Service the type and annotations. An application pod that takes the
// connection Secret <name>-app whole with envFrom, labelled as a client the
// instance's NetworkPolicy admits, sets and gets a key with REDIS_HOST,
// REDIS_PORT, REDIS_USERNAME and REDIS_PASSWORD, and with REDIS_URL.
// `kubectl scale rp/app --replicas=10` is refused with spec.replicas'
// maximum; `kubectl scale rp/app --replicas=3` grows it into a primary, two
// replicas and Sentinels: kubectl get rp shows READY 1/1 before and 3/3 after, the
// phase Ready (the primary's pod rolled by the scale is not a restart), the
// scale subresource counts 3 server pods, the primary keeps its keys and the
// replicas get them. The Secret gains the Sentinels' address: a new
// application pod asks them for the primary (SENTINEL
// get-master-addr-by-name) and is answered with the primary's pod, and
// counts the keys through the node's address and node port, as a client
// outside the cluster would. Then (not with -short) the primary's pod is
// deleted without grace: once the servers replicate again, every server
// pod, the new one included, still carries the options, the Services keep
// their type, node port and annotations, and the node port still reaches a
// primary with every key.
func TestApplicationScalesOut(t *testing.T) {
	const name = "app"
	ctx := context.Background()
	priorityClass := &schedulingv1.PriorityClass{
		ObjectMeta:  metav1.ObjectMeta{Name: namespace + "-redis"},
		Value:       appPriority,
		Description: "the e2e test " + t.Name() + " in namespace " + namespace,
	}
	if err := k8s.Create(ctx, priorityClass); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), priorityClass) })
	create(t, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable},
		Placement: v1alpha1.PlacementSpec{
			// One node is one topology domain: the skew is 0 whatever the
			// count, so DoNotSchedule holds and the scheduler has read it.
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			}},
			PriorityClassName: priorityClass.Name,
		},
		PodMetadata: &v1alpha1.PodMetadata{Labels: appPodLabels, Annotations: appPodAnnotations},
		Service:     &v1alpha1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Annotations: appServiceAnnotations},
		// A connection through a node port reaches a server on another node
		// from that node's address (kube-proxy masquerades it), which no pod
		// selector matches: the nodes are admitted by address, as a client
		// outside the cluster would be, beside the labelled pods.
		NetworkPolicy: &v1alpha1.NetworkPolicySpec{Clients: append(nodeAddressPeers(t),
			networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"uringredis.io/client": name}}})},
	})
	deleteReplicaClaimsAtEnd(t, name)
	start := time.Now()
	waitReady(t, name)
	t.Logf("one server Ready %s after its creation", time.Since(start).Round(time.Second))
	checkPodOptions(t, name, priorityClass.Name, 1)
	nodePort := checkServiceOptions(t, name, name)

	out := runClient(t, name, "app-client", `set -e
valkey-cli --no-auth-warning -h "$REDIS_HOST" -p "$REDIS_PORT" --user "$REDIS_USERNAME" --pass "$REDIS_PASSWORD" SET app:greeting hello
valkey-cli --no-auth-warning -u "$REDIS_URL" GET app:greeting
`)
	if out != "OK\nhello" {
		t.Fatalf("the application pod, with the connection Secret's host, port, user and password then its URL, printed %q, want OK then hello", out)
	}
	var script strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&script, "SET key:%d value:%d\n", i, i)
	}
	podExec(t, name+"-0", script.String(), "valkey-cli")
	const keys = "1001" // and app:greeting
	app := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-app"}, app); err != nil {
		t.Fatal(err)
	}
	if _, ok := app.Data["REDIS_SENTINEL_HOST"]; ok {
		t.Errorf("the connection Secret of a single server names Sentinels: %s", app.Data["REDIS_SENTINEL_HOST"])
	}
	if got := kubectlGetRP(t, name); got["READY"] != "1/1" || got["PHASE"] != "Ready" || got["PRIMARY"] != "" {
		t.Errorf("kubectl get rp %s before scaling: %v; want READY 1/1, PHASE Ready, no PRIMARY", name, got)
	}

	// As a user types it: through the scale subresource on spec.replicas,
	// which the spec's rules hold to.
	refused, err := execOutput(kubectl[0], append(kubectl[1:], "-n", namespace, "scale", "rp/"+name, "--replicas=10")...)
	if err == nil || !strings.Contains(refused, "spec.replicas in body should be less than or equal to 9") {
		t.Errorf("kubectl scale --replicas=10: err %v, output %q; want spec.replicas' maximum refusing it", err, refused)
	}
	start = time.Now()
	if out := run(t, kubectl[0], append(kubectl[1:], "-n", namespace, "scale", "rp/"+name, "--replicas=3")...); !strings.Contains(out, "scaled") {
		t.Fatalf("kubectl scale said %q", out)
	}
	rp := waitFor(t, name, 6*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if err := hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating")(rp); err != nil {
			return err
		}
		if err := hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")(rp); err != nil {
			return err
		}
		if st := rp.Status; st.Instances != 3 || st.ReadyInstances != 3 || st.Ready != "3/3" || st.Phase != v1alpha1.PhaseReady {
			return fmt.Errorf("status: instances %d, readyInstances %d, ready %q, phase %q", st.Instances, st.ReadyInstances, st.Ready, st.Phase)
		}
		return nil
	})
	t.Logf("scaled to 3 servers, replicating and Ready %s after kubectl scale", time.Since(start).Round(time.Second))
	if rp.Spec.Replicas != 3 || rp.Status.Primary != name+"-0" {
		t.Errorf("after kubectl scale: spec.replicas %d, status.primary %q; want 3 and the server that had the data, %s-0", rp.Spec.Replicas, rp.Status.Primary, name)
	}
	if got := kubectlGetRP(t, name); got["READY"] != "3/3" || got["PHASE"] != "Ready" || got["PRIMARY"] != name+"-0" {
		t.Errorf("kubectl get rp %s after scaling: %v; want READY 3/3, PHASE Ready, PRIMARY %s-0", name, got, name)
	}
	scale := run(t, kubectl[0], append(kubectl[1:], "-n", namespace, "get", "rp", name, "--subresource=scale",
		"-o", "jsonpath={.spec.replicas} {.status.replicas} {.status.selector}")...)
	if want := "3 3 app.kubernetes.io/instance=" + name + ",app.kubernetes.io/name=redis"; scale != want {
		t.Errorf("the scale subresource reads %q, want %q", scale, want)
	}
	if n := cli(t, name, "dbsize"); n != keys {
		t.Fatalf("the primary holds %s keys after scaling, want %s", n, keys)
	}
	for _, replica := range []string{name + "-1", name + "-2"} {
		var n string
		eventually(t, time.Minute, func() bool {
			n, _ = tryPodExec(replica, "valkey-cli", "DBSIZE")
			return n == keys
		})
		if n != keys {
			t.Errorf("the replica %s holds %q keys, want %s", replica, n, keys)
		}
	}
	checkPodOptions(t, name, priorityClass.Name, 3)
	checkServiceOptions(t, name, name+"-replicas")

	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-app"}, app); err != nil {
		t.Fatal(err)
	}
	if host := string(app.Data["REDIS_SENTINEL_HOST"]); host != name+"-sentinel."+namespace+".svc" {
		t.Fatalf("the connection Secret's REDIS_SENTINEL_HOST is %q after scaling out", host)
	}
	nodeIP := getPod(t, name+"-0").Status.HostIP
	out = runClient(t, name, "sentinel-client", fmt.Sprintf(`set -e
export REDISCLI_AUTH="$REDIS_PASSWORD"
valkey-cli -h "$REDIS_SENTINEL_HOST" -p "$REDIS_SENTINEL_PORT" SENTINEL get-master-addr-by-name "$REDIS_SENTINEL_MASTER"
valkey-cli -h "$REDIS_HOST" -p "$REDIS_PORT" GET app:greeting
valkey-cli -h %s -p %d DBSIZE
`, nodeIP, nodePort))
	if want := fmt.Sprintf("%s-0.%s-headless.%s.svc\n6379\nhello\n%s", name, name, namespace, keys); out != want {
		t.Fatalf("the application pod asked the Sentinels for the primary, read a key through REDIS_HOST and counted the keys through %s:%d:\n%s\nwant\n%s",
			nodeIP, nodePort, out, want)
	}

	if ciForm(t) {
		return
	}
	lost := getPod(t, name+"-0")
	if err := k8s.Delete(ctx, lost, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	rp = waitFor(t, name, 4*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if err := hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating")(rp); err != nil {
			return err
		}
		if rp.Status.ReadyInstances != 3 {
			return fmt.Errorf("%d ready server pods", rp.Status.ReadyInstances)
		}
		// The status a moment after the deletion may be the one from
		// before: the new pod's role label is the operator's word that it
		// has seen the new pod serve.
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(lost), pod); err != nil {
			return err
		}
		if pod.UID == lost.UID || !podReady(pod) || pod.Labels["uringredis.io/role"] == "" {
			return fmt.Errorf("%s: the old pod, not ready, or without a role label (%q)", pod.Name, pod.Labels["uringredis.io/role"])
		}
		return hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")(rp)
	})
	t.Logf("%s primary, 3 servers replicating %s after the primary's pod was deleted", rp.Status.Primary, time.Since(start).Round(time.Second))
	waitServiceSelects(t, name, rp.Status.Primary)
	checkPodOptions(t, name, priorityClass.Name, 3)
	if port := checkServiceOptions(t, name, name); port != nodePort {
		t.Errorf("the Service %s moved from node port %d to %d", name, nodePort, port)
	}
	// kube-proxy follows the new endpoint a moment after the EndpointSlice.
	out = runClient(t, name, "nodeport-client", fmt.Sprintf(`export REDISCLI_AUTH="$REDIS_PASSWORD"
for i in $(seq 30); do
  role=$(valkey-cli -h %s -p %d INFO replication | grep '^role:' | tr -d '\r')
  [ "$role" = role:master ] && break
  sleep 1
done
echo "$role"
valkey-cli -h %[1]s -p %[2]d DBSIZE
`, nodeIP, nodePort))
	if want := "role:master\n" + keys; out != want {
		t.Errorf("through the node's port %s:%d after the failover: %q, want %q", nodeIP, nodePort, out, want)
	}
}

// nodeAddressPeers are NetworkPolicy peers for the nodes' internal addresses.
func nodeAddressPeers(t *testing.T) []networkingv1.NetworkPolicyPeer {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := k8s.List(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	var peers []networkingv1.NetworkPolicyPeer
	for _, node := range nodes.Items {
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && !strings.Contains(a.Address, ":") {
				peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: a.Address + "/32"}})
			}
		}
	}
	return peers
}

// checkPodOptions checks the running pods of instance name against the
// options of TestApplicationScalesOut: each of its servers carries the
// podMetadata labels and annotations, the priority of priorityClass and
// the spread constraint with the instance's server selector; its Sentinels
// carry the priority and not the podMetadata.
func checkPodOptions(t *testing.T, name, priorityClass string, servers int) {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		seen = append(seen, pod.Name)
		if pod.Spec.PriorityClassName != priorityClass || ptr.Deref(pod.Spec.Priority, 0) != appPriority {
			t.Errorf("pod %s: priorityClassName %q, priority %v; want %s, %d", pod.Name, pod.Spec.PriorityClassName, ptr.Deref(pod.Spec.Priority, 0), priorityClass, appPriority)
		}
		hasMetadata := hasAll(pod.Labels, appPodLabels) && hasAll(pod.Annotations, appPodAnnotations)
		switch component := pod.Labels["app.kubernetes.io/component"]; component {
		case "server":
			servers--
			if !hasMetadata {
				t.Errorf("server pod %s lacks the podMetadata: labels %v, annotations %v", pod.Name, pod.Labels, pod.Annotations)
			}
			if c := pod.Spec.TopologySpreadConstraints; len(c) != 1 || c[0].TopologyKey != corev1.LabelHostname || c[0].LabelSelector == nil || !selects(t, c[0].LabelSelector, pod.Labels) {
				t.Errorf("server pod %s: topologySpreadConstraints %+v, want the one on %s selecting the instance's servers", pod.Name, c, corev1.LabelHostname)
			}
		case "sentinel":
			if hasMetadata {
				t.Errorf("Sentinel pod %s carries the servers' podMetadata: labels %v", pod.Name, pod.Labels)
			}
		default:
			t.Errorf("pod %s of instance %s has component %q", pod.Name, name, component)
		}
	}
	if servers != 0 {
		t.Errorf("pods of instance %s: %v; %d server pods more or fewer than expected", name, seen, servers)
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasAll[V ~string](set map[string]string, want map[string]V) bool {
	for k, v := range want {
		if set[k] != string(v) {
			return false
		}
	}
	return true
}

// checkServiceOptions checks that the client-facing Service service of
// instance name is a NodePort with the annotations of
// TestApplicationScalesOut and that its headless and Sentinel Services are
// neither, and returns the node port of the server port.
func checkServiceOptions(t *testing.T, name, service string) int32 {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: service}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort || !hasAll(svc.Annotations, appServiceAnnotations) {
		t.Errorf("Service %s: type %s, annotations %v; want NodePort with %v", service, svc.Spec.Type, svc.Annotations, appServiceAnnotations)
	}
	var nodePort int32
	for _, p := range svc.Spec.Ports {
		if p.Port == serverPort {
			nodePort = p.NodePort
		}
	}
	if nodePort == 0 {
		t.Fatalf("Service %s has no node port for %d: %+v", service, serverPort, svc.Spec.Ports)
	}
	// The headless Service and the Sentinels' (once replicated) stay inside the cluster.
	for _, other := range []string{name + "-headless", name + "-sentinel"} {
		svc := &corev1.Service{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: other}, svc); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Type != corev1.ServiceTypeClusterIP || hasAll(svc.Annotations, appServiceAnnotations) {
			t.Errorf("Service %s: type %s, annotations %v; want ClusterIP without spec.service's annotations", other, svc.Spec.Type, svc.Annotations)
		}
	}
	return nodePort
}

// kubectlGetRP reads `kubectl get rp name` as a person reads it: each
// column's cell under its header (kubectl aligns them), empty cells too.
func kubectlGetRP(t *testing.T, name string) map[string]string {
	t.Helper()
	out := strings.TrimSpace(run(t, kubectl[0], append(kubectl[1:], "-n", namespace, "get", "rp", name)...))
	lines := strings.Split(out, "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get rp %s printed:\n%s", name, out)
	}
	header, row := lines[0], lines[1]
	var starts []int // where each header, and so each cell, begins
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	cells := map[string]string{}
	for i, start := range starts {
		end := len(row)
		if i+1 < len(starts) {
			end = min(end, starts[i+1])
		}
		column := strings.Fields(header[start:])[0]
		cells[column] = strings.TrimSpace(row[min(start, end):end])
	}
	t.Logf("$ kubectl get rp %s\n%s", name, out)
	return cells
}

// runClient runs script with sh in a pod of its own as an application of
// instance name runs: the connection Secret <name>-app taken whole with
// envFrom, labelled as the instance's client (uringredis.io/client: <name>,
// what its NetworkPolicy admits), under Pod Security restricted, on the
// server's image for its valkey-cli. It returns what the script printed
// and fails the test when the script fails or when the instance's
// NetworkPolicies (the server's, and the Sentinels' once replicated) would
// not admit the pod.
func runClient(t *testing.T, name, pod, script string) string {
	t.Helper()
	ctx := context.Background()
	// A NetworkPolicy enforcer admits a new pod a moment after it starts
	// (kube-router: about a second): applications retry their first
	// connection, and so does this one, for up to 30 s.
	script = `for i in $(seq 60); do
  case $(valkey-cli -t 1 -h "$REDIS_HOST" -p "$REDIS_PORT" --no-auth-warning PING 2>&1) in "Could not connect"*) sleep 0.5 ;; *) break ;; esac
done
` + script
	app := restrictedPod(pod, "app", getPod(t, name+"-0").Spec.Containers[0].Image,
		map[string]string{"uringredis.io/client": name}, "sh", "-c", script)
	app.Spec.RestartPolicy = corev1.RestartPolicyNever
	app.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-app"}}}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), app) })
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
			return false, err
		}
		return app.Status.Phase == corev1.PodSucceeded || app.Status.Phase == corev1.PodFailed, nil
	})
	logs, _ := execOutput(kubectl[0], append(kubectl[1:], "-n", namespace, "logs", pod)...)
	if err != nil || app.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the application pod %s: phase %s (%v), it printed:\n%s", pod, app.Status.Phase, err, logs)
	}
	// Read as well as tried: a cluster may enforce no NetworkPolicy (E2E_NETWORK_POLICY unset).
	rp := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rp); err != nil {
		t.Fatal(err)
	}
	policies := map[string]int32{name: serverPort}
	if rp.Spec.Replicas > 1 {
		policies[name+"-sentinel"] = sentinelPort
	}
	for policy, port := range policies {
		np := &networkingv1.NetworkPolicy{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: policy}, np); err != nil {
			t.Fatalf("the NetworkPolicy %s: %v", policy, err)
		}
		if !admits(t, np, port, app, map[string]string{corev1.LabelMetadataName: namespace}) {
			t.Errorf("the NetworkPolicy %s does not admit the application pod %s (labels %v) to port %d: %+v", policy, pod, app.Labels, port, np.Spec.Ingress)
		}
	}
	return strings.TrimSpace(logs)
}
