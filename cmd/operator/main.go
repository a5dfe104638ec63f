// Command operator runs the uring-redis-operator controllers.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/controllers"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

func main() {
	var (
		metricsAddr, probeAddr  string
		leaderElect, labelNodes bool
		secureMetrics           bool
		metricsCertDir          string
		maxConcurrentReconciles int
		maxConcurrentUpgrades   int
		opts                    specs.Options
		benchOpts               specs.BenchmarkOptions
		backupOpts              specs.BackupOptions
		operatorNamespace       string
		operatorPodLabels       string
		prometheusPodLabels     string
		prometheusNSLabels      string
		watchNamespaces         string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to; 0 disables it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, only to callers whose Kubernetes token may get the non-resource URL /metrics; false serves plain HTTP to anyone.")
	flag.StringVar(&metricsCertDir, "metrics-cert-dir", "", "Directory with the metrics endpoint's tls.crt and tls.key; empty means a self-signed certificate.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the health probes bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so only one replica reconciles.")
	flag.BoolVar(&labelNodes, "label-nodes", true, "Label nodes with their kernel version (uringredis.io/kernel-version.*) for clusters without Node Feature Discovery.")
	flag.StringVar(&opts.RedisImage, "redis-image", "", "Server image (Valkey with the io_uring AOF engine); required.")
	flag.StringVar(&opts.ExporterImage, "exporter-image", "oliver006/redis_exporter:v1.74.0", "redis_exporter sidecar image.")
	flag.StringVar(&opts.UringSeccompProfile, "uring-seccomp-profile", "uring-redis/io_uring.json", "Localhost seccomp profile of uring pods, relative to the kubelet's seccomp directory.")
	flag.StringVar(&opts.LocalNVMeStorageClass, "local-nvme-storage-class", "uring-local-nvme", "StorageClass of the local-nvme storage profile.")
	flag.StringVar(&opts.GP3StorageClass, "gp3-storage-class", "uring-gp3", "StorageClass of the gp3 storage profile.")
	flag.IntVar(&maxConcurrentReconciles, "max-concurrent-reconciles", 4, "RedisPersistences, and RedisBenchmarks, reconciled at once; a slow server or API call then delays only its own object.")
	flag.IntVar(&maxConcurrentUpgrades, "max-concurrent-upgrades", 1, "How many RedisPersistences may roll an upgrade of the operator's making at once (a new --redis-image, --exporter-image or --uring-seccomp-profile, a new operator version), each until its server is Ready; at least 1. A change to a RedisPersistence's own spec rolls it at once.")
	flag.StringVar(&benchOpts.Image, "bench-image", "", "RedisBenchmark runner image (cmd/bench with valkey-benchmark); required.")
	flag.StringVar(&backupOpts.Image, "backup-image", "", "Image with the backup agent (/uring-backup): the operator's own image. Empty: RedisBackups wait, saying so.")
	var imagePull specs.ImagePull
	flag.Func("image-pull-policy", "Pull policy of every container of the pods the operator creates (Always, IfNotPresent, Never); empty leaves the API server's default.", func(v string) error {
		switch policy := corev1.PullPolicy(v); policy {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
			imagePull.Policy = policy
			return nil
		}
		return fmt.Errorf("%q is none of Always, IfNotPresent, Never", v)
	})
	flag.Func("image-pull-secrets", "Comma-separated Secrets (in each pod's namespace) that the pods the operator creates pull their images with.", func(v string) error {
		imagePull.Secrets = nil
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				imagePull.Secrets = append(imagePull.Secrets, name)
			}
		}
		return nil
	})
	flag.BoolVar(&opts.NetworkPolicy.Enabled, "network-policy", true, "Give every RedisPersistence whose spec.networkPolicy.enabled is empty a NetworkPolicy that admits only its clients, its benchmark runners, the operator and Prometheus.")
	flag.StringVar(&operatorNamespace, "operator-namespace", "", "Namespace of the operator's pods, which the NetworkPolicies admit to the servers; empty admits none (an operator running outside the cluster).")
	flag.StringVar(&operatorPodLabels, "operator-pod-labels", "", "Labels of the operator's pods (k=v,k=v), with --operator-namespace.")
	flag.StringVar(&prometheusPodLabels, "prometheus-pod-labels", "app.kubernetes.io/name=prometheus", "Labels (k=v,k=v) of the pods the NetworkPolicies admit to the exporter port; empty means every pod of the namespaces --prometheus-namespace-labels selects.")
	flag.StringVar(&prometheusNSLabels, "prometheus-namespace-labels", "", "Labels (k=v,k=v) of the namespaces of those pods; empty means every namespace.")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces whose RedisPersistences, RedisBenchmarks and RedisBackups the operator reconciles, and whose objects it caches; empty means every namespace. The operator then needs its namespaced permissions in those namespaces only.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	opts.ImagePull, benchOpts.ImagePull, backupOpts.ImagePull = imagePull, imagePull, imagePull
	opts.AgentImage = backupOpts.Image
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	setupLog := ctrl.Log.WithName("setup")
	// No default image: a default names an image of some release, which a
	// build of another would run. The chart and dist/install.yaml pass them.
	if opts.RedisImage == "" || benchOpts.Image == "" {
		setupLog.Error(nil, "--redis-image and --bench-image are required", "redis-image", opts.RedisImage, "bench-image", benchOpts.Image)
		os.Exit(1)
	}
	if maxConcurrentUpgrades < 1 {
		setupLog.Error(nil, "--max-concurrent-upgrades must be at least 1", "max-concurrent-upgrades", maxConcurrentUpgrades)
		os.Exit(1)
	}

	namespaces, err := controllers.ParseWatchNamespaces(watchNamespaces)
	if err != nil {
		setupLog.Error(err, "parsing --watch-namespaces")
		os.Exit(1)
	}
	if opts.NetworkPolicy, err = specs.ParseNetworkPolicyOptions(opts.NetworkPolicy.Enabled, operatorNamespace, operatorPodLabels, prometheusNSLabels, prometheusPodLabels); err != nil {
		setupLog.Error(err, "parsing the NetworkPolicy flags")
		os.Exit(1)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	// PodMonitors are applied only where their CRD is served; the kind is known either way.
	utilruntime.Must(monitoringv1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(namespaces),
		Metrics:                controllers.MetricsServerOptions(metricsAddr, secureMetrics, metricsCertDir),
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "uring-redis-operator.uringredis.io",
		// The process ends as soon as the manager stops (main returns): give
		// the lease up then, so that a standby, or the next version's pod in a
		// rolling update, leads at once instead of after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		EventBroadcaster:              controllers.EventBroadcaster(), //nolint:staticcheck // lives as long as the process
	})
	if err != nil {
		setupLog.Error(err, "creating the manager")
		os.Exit(1)
	}
	if err := (&controllers.RedisPersistenceReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Options:                 opts,
		MaxConcurrentReconciles: maxConcurrentReconciles,
		MaxConcurrentUpgrades:   maxConcurrentUpgrades,
		Recorder:                mgr.GetEventRecorderFor("uring-redis-operator"),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "setting up the RedisPersistence controller")
		os.Exit(1)
	}
	if err := (&controllers.RedisBenchmarkReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Options:                 benchOpts,
		MaxConcurrentReconciles: maxConcurrentReconciles,
		Recorder:                mgr.GetEventRecorderFor("uring-redis-operator"),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "setting up the RedisBenchmark controller")
		os.Exit(1)
	}
	if err := (&controllers.RedisBackupReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Options:   backupOpts,
		Recorder:  mgr.GetEventRecorderFor("uring-redis-operator"),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "setting up the RedisBackup controller")
		os.Exit(1)
	}
	if err := (&controllers.BackupScheduler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor("uring-redis-operator"),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "setting up the backup scheduler")
		os.Exit(1)
	}
	if err := (&controllers.BackupVerifier{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor("uring-redis-operator"),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "setting up the backup verifier")
		os.Exit(1)
	}
	if labelNodes {
		if err := (&controllers.NodeLabeler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			setupLog.Error(err, "setting up the node labeler")
			os.Exit(1)
		}
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))

	setupLog.Info("starting the manager", "watchNamespaces", namespaces)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "running the manager")
		os.Exit(1)
	}
}
