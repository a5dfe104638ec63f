#!/usr/bin/env bash
# make demo: the product's main job, end to end, on this machine.
#
#   hack/demo.sh        # cluster -> images -> helm install -> one RedisPersistence per mode
#                       # -> Prometheus -> RedisBenchmark -> comparison table + PNG -> dashboard queries
#   hack/demo.sh down   # remove what it made (the cluster included); caches under bin/ stay
#
# The cluster is the offline one-node cluster of e2e/cluster (E2E_CLUSTER=local, the
# default) or the kind cluster of e2e/kind (E2E_CLUSTER=kind: a control plane and
# three workers); each runs its own registry, which `make release` pushes to.
# On the local cluster the durable and AOF modes also run on a second device class:
# volumes with a slow, serial cache flush like EBS gp3 (emulated: ext4 on a loop
# device over fusedisk, 1.5 ms per flush; e2e/cluster/cluster.sh make_slow_disks),
# the StorageClass uring-gp3-like. DEMO_GP3=0 leaves them out (kind has no such disks).
# DEMO_REQUESTS (default 50000) sizes each command of the benchmark, DEMO_REPETITIONS
# (default 3) how many interleaved rounds it runs, DEMO_PROMETHEUS_PORT (9090) where
# this machine reaches the demo's Prometheus.
# Every step logs to bin/demo/logs/<step>.log; a failure names the step and its log.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
work=$repo/bin/demo
logs=$work/logs
ns=uring-demo
requests=${DEMO_REQUESTS:-50000}
repetitions=${DEMO_REPETITIONS:-3}
prom_port=${DEMO_PROMETHEUS_PORT:-9090}
make=(make --no-print-directory)

export E2E_CLUSTER=${E2E_CLUSTER:-local}
gp3=${DEMO_GP3:-1}
[[ $E2E_CLUSTER == local ]] || gp3=0
kubeconfig=$("${make[@]}" -s print-e2e-kubeconfig)
kubectl_bin=$("${make[@]}" -s print-kubectl)
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" "$@"; }
uring() { "$repo/bin/kubectl-uring" --kubeconfig "$kubeconfig" "$@"; }

start=$SECONDS
elapsed() { local s=$((SECONDS - ${1:-$start})); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
total_steps=8
n=0
# step NAME COMMAND...: runs COMMAND with its output in bin/demo/logs/NAME.log,
# saying every 30 s that it is still at it.
step() {
  local name=$1 log=$logs/$1.log t0=$SECONDS ticker rc=0
  shift
  n=$((n + 1))
  printf '[demo %d/%d] %s (started at %s)\n' "$n" "$total_steps" "$name" "$(elapsed)"
  (while sleep 30; do
    printf '           ... %s, %s so far: %s\n' "$name" "$(elapsed "$t0")" "$(tail -n 1 "$log" | tr -s ' ' | cut -c1-90)"
  done) &
  ticker=$!
  # In the background, not under `||`: bash ignores set -e inside a function
  # called from a `||` list, so a failing command midway would pass unnoticed.
  "$@" >"$log" 2>&1 &
  wait $! || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if ((rc != 0)); then
    printf '\ndemo: step "%s" failed after %s (exit %d). Last lines of %s:\n' "$name" "$(elapsed "$t0")" "$rc" "$log" >&2
    tail -n 25 "$log" | sed 's/^/  | /' >&2
    exit "$rc"
  fi
  printf '           done in %s\n' "$(elapsed "$t0")"
}

# The modes compared, as RedisPersistence specs, in benchmark order, and the
# storage of each: the local ext4 volumes, and the gp3-like ones for the modes a
# device's flush slows (none never touches the disk while it serves).
targets=(demo-none demo-everysec demo-always demo-uring-durable demo-uring-fast)
declare -A specs=(
  [demo-none]='mode: none'
  [demo-everysec]=$'mode: aof\n  aof: {fsync: everysec}'
  [demo-always]=$'mode: aof\n  aof: {fsync: always}'
  [demo-uring-durable]=$'mode: uring\n  uring: {ack: durable}'
  [demo-uring-fast]=$'mode: uring\n  uring: {ack: fast}'
)
declare -A storage
for t in "${targets[@]}"; do storage[$t]='profile: local-nvme'; done
if ((gp3)); then
  export E2E_SLOW_DISKS=${E2E_SLOW_DISKS:-4}
  for t in demo-everysec demo-always demo-uring-durable demo-uring-fast; do
    targets+=("$t-gp3")
    specs[$t-gp3]=${specs[$t]}
    storage[$t-gp3]='storageClassName: uring-gp3-like'
  done
fi

instances() {
  kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -
  local t
  for t in "${targets[@]}"; do
    cat <<EOF
---
apiVersion: persistence.uringredis.io/v1alpha1
kind: RedisPersistence
metadata: {name: $t, namespace: $ns}
spec:
  ${specs[$t]}
  storage: {${storage[$t]}, size: 1Gi}
  benchmark: {crashCheck: true}
EOF
  done | tee "$work/instances.yaml" | kubectl apply -f -
  kubectl -n "$ns" wait redispersistence --all --for=condition=Ready --timeout=10m
  kubectl -n "$ns" get redispersistence -o wide
}

# The benchmark through the project's kubectl plugin, as a user runs it: it
# creates the RedisBenchmark, follows it (its progress is the step's log) and
# prints the comparison table.
benchmark() {
  kubectl -n "$ns" delete redisbenchmark modes --ignore-not-found --wait
  "${make[@]}" -s kubectl-uring
  # The RedisBenchmark it creates, for the record.
  echo "bin/kubectl-uring -n $ns bench ${targets[*]} --name modes --commands set,hset,lpush,incr --requests $requests" \
    "--clients 50 --mixed-reads --repetitions $repetitions --crash-check --crash-check-seconds 5 --runner-cpu 500m" >"$work/benchmark.txt"
  uring -n "$ns" bench "${targets[@]}" --name modes --commands set,hset,lpush,incr --requests "$requests" \
    --clients 50 --mixed-reads --repetitions "$repetitions" --crash-check --crash-check-seconds 5 --runner-cpu 500m --timeout 1h
}

report() {
  kubectl -n "$ns" get redisbenchmark modes -o json >"$work/modes.json"
  go run ./internal/benchreport/cmd/bench-report -in "$work/modes.json" -out "$work/bench-report.png" -table \
    -title "Persistence modes compared ($E2E_CLUSTER cluster, $requests requests per command, 50 clients, median of $repetitions)" >"$work/table.txt"
  if ((gp3)); then
    printf '\nstorage local-nvme: ext4 on a loop device (this VM'"'"'s disk); uring-gp3-like: the same over fusedisk, every flush\n'
    printf '1.5 ms and serial, like an EBS gp3 volume (emulated; EBS also slows writes, which this does not)\n'
  fi >>"$work/table.txt"
  cat "$work/table.txt"
}

# A Prometheus (Debian's build, as in the tests: e2e/images/prometheus) in the
# demo's namespace, as a user would run one: it discovers the exporters and the
# operator through the API server, the instances' NetworkPolicies admit it by its
# label app.kubernetes.io/name: prometheus (the chart's networkPolicy.prometheus),
# and it reads the operator's HTTPS metrics with its ServiceAccount's token, which
# the chart's metrics-reader ClusterRole allows. This machine reaches it through
# kubectl port-forward on 127.0.0.1:$prom_port (on kind the host has no route to
# pod IPs).
prometheus() {
  stop_prometheus
  "${make[@]}" e2e-fixtures E2E_FIXTURES=prometheus
  mkdir -p "$work/prometheus"
  local config
  config=$(
    cat <<EOF
global: {scrape_interval: 5s}
scrape_configs:
  - job_name: redis
    kubernetes_sd_configs: [{role: pod, namespaces: {names: [$ns]}}]
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}
      - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
      - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
  - job_name: uring-redis-operator
    honor_labels: true # its benchmark metrics carry the benchmark's namespace
    scheme: https
    tls_config: {insecure_skip_verify: true} # a self-signed certificate; the token is what is checked
    authorization: {credentials_file: /var/run/secrets/kubernetes.io/serviceaccount/token}
    kubernetes_sd_configs: [{role: pod, namespaces: {names: [uring-redis-system]}}]
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}
      - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
EOF
  )
  cat <<EOF | tee "$work/prometheus/prometheus.yaml" | kubectl apply -f -
apiVersion: v1
kind: ServiceAccount
metadata: {name: demo-prometheus, namespace: $ns}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: demo-prometheus}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: demo-prometheus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: demo-prometheus}
subjects: [{kind: ServiceAccount, name: demo-prometheus, namespace: $ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: demo-prometheus-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: uring-redis-operator-metrics-reader}
subjects: [{kind: ServiceAccount, name: demo-prometheus, namespace: $ns}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: demo-prometheus, namespace: $ns}
data:
  prometheus.yml: |
    ${config//$'\n'/$'\n    '}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: demo-prometheus, namespace: $ns}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: prometheus, app.kubernetes.io/instance: demo}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: prometheus, app.kubernetes.io/instance: demo}
      # A new configuration rolls the pod, which reads it at start.
      annotations: {demo.uringredis.io/config-hash: "$(sha256sum <<<"$config" | cut -c1-16)"}
    spec:
      serviceAccountName: demo-prometheus
      securityContext: {runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: prometheus
          image: prometheus:e2e
          imagePullPolicy: Never # a fixture of the test bed, imported into the nodes
          args: [--config.file=/etc/prometheus/prometheus.yml, --storage.tsdb.path=/prometheus]
          ports: [{name: web, containerPort: 9090}]
          readinessProbe: {httpGet: {path: /-/ready, port: web}, periodSeconds: 2}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
          volumeMounts:
            - {name: config, mountPath: /etc/prometheus}
            - {name: data, mountPath: /prometheus}
      volumes:
        - {name: config, configMap: {name: demo-prometheus}}
        - {name: data, emptyDir: {}}
EOF
  kubectl -n "$ns" rollout status deployment/demo-prometheus --timeout=3m
  setsid "$kubectl_bin" --kubeconfig "$kubeconfig" -n "$ns" port-forward deployment/demo-prometheus \
    "$prom_port:9090" --address 127.0.0.1 >"$logs/prometheus-port-forward.log" 2>&1 </dev/null &
  echo $! >"$work/prometheus/pid"
  prom_has_data "count(up{job=\"redis\"} == 1) == ${#targets[@]}"
  prom_has_data 'count(up{job="uring-redis-operator"} == 1)'
}
prom_has_data() {
  local result
  for _ in $(seq 60); do
    result=$(curl -fsS "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" 2>/dev/null || true)
    if [[ $result == *'"value":['* ]]; then
      echo "$1 -> $(grep -o '"value":\[[^]]*\]' <<<"$result")"
      return
    fi
    sleep 2
  done
  echo "Prometheus has no data for $1: $result" >&2
  return 1
}

# Every query of the chart's dashboards must return data from this
# Prometheus: the benchmark's metrics and the exporters' live ones.
dashboards() {
  prom_has_data 'count(uringredis_benchmark_ops_per_second)'
  go run ./internal/dashboards/cmd/check-queries -prometheus "http://127.0.0.1:$prom_port" -rate-interval 15m
}

stop_prometheus() {
  local pid
  pid=$(cat "$work/prometheus/pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  rm -f "$work/prometheus/pid"
}

down() {
  stop_prometheus
  "${make[@]}" e2e-down
  rm -rf "$work"
  echo "demo: removed (caches under bin/ stay)"
}

case ${1:-up} in
  down)
    down
    exit
    ;;
  up) ;;
  *)
    echo "usage: $0 [up|down]" >&2
    exit 2
    ;;
esac

mkdir -p "$logs"
echo "demo: $E2E_CLUSTER cluster; logs in $logs"
step cluster "${make[@]}" e2e-up
step images "${make[@]}" e2e-images
step operator "${make[@]}" e2e-install
step instances instances
step prometheus prometheus
step benchmark benchmark
step report report
step dashboards dashboards

cat <<EOF

Persistence modes compared on this machine (RedisBenchmark $ns/modes; each command's
median of $repetitions interleaved repetitions; write ops/s is the mean over SET, HSET, LPUSH
and INCR; ratios are to the everysec and always targets of the same run on the same storage;
crash: a kill of the server during 5 s of writes by 50 clients):

$(cat "$work/table.txt")

Report:      $work/bench-report.png
Results:     kubectl --kubeconfig $kubeconfig -n $ns get redisbenchmark modes -o yaml
             (the plugin ran it: $(cat "$work/benchmark.txt"))

One instance on one screen, \`kubectl uring status demo-uring-durable -n $ns\` (the crash check killed each
server once on purpose: a Restarted event and Degraded for a minute after it are that kill):

$(uring -n "$ns" status demo-uring-durable 2>&1 | sed 's/^/  /')
EOF
cat <<EOF
Prometheus:  http://127.0.0.1:$prom_port (deployment/demo-prometheus in $ns, port-forwarded; it scrapes
             the exporters in $ns and the operator; $(tail -n 1 "$logs/dashboards.log"))
             e.g. uringredis_benchmark_ops_per_second, redis_script_values{key="aof_uring_active"}
Dashboards:  charts/uring-redis-operator/dashboards/*.json. With the chart's grafana.dashboards.enabled
             a Grafana sidecar loads them (label grafana_dashboard: "1"); else import each file in
             Grafana (Dashboards > New > Import) and pick the Prometheus data source.
Done in $(elapsed). Remove it all with: make demo-down
EOF
