package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// resyncInterval re-reads a running server's INFO: a fallback to the posix
// engine can happen at any restart, which no Kubernetes object records.
const resyncInterval = time.Minute

// reconcileTimeout bounds every call a reconcile makes (API server, servers):
// a call that hangs fails the reconcile, which is retried, instead of holding
// a worker that every other RedisPersistence waits for.
const reconcileTimeout = 30 * time.Second

// secretIndex indexes RedisPersistences by the Secrets they read (the
// password's, the TLS certificate's), so a change of such a Secret reaches
// the RedisPersistences that use it.
const secretIndex = "secrets"

// RedisPersistenceReconciler turns a RedisPersistence into the objects that
// run it (a ConfigMap, Services, a StatefulSet; with replicas the Sentinels and
// PodDisruptionBudgets; a NetworkPolicy, a cert-manager Certificate, storage
// probe Jobs and, where served, a PodMonitor) and the connection Secret that
// applications read, converges the running servers'
// mode and options, and reports what they do.
type RedisPersistenceReconciler struct {
	client.Client
	// APIReader reads Secrets straight from the API server: the operator may
	// get the Secrets its servers use, and caching every Secret in the cluster
	// would need (and hold) far more than that.
	APIReader client.Reader
	Options   specs.Options
	// MaxConcurrentReconciles is how many RedisPersistences reconcile at once.
	MaxConcurrentReconciles int
	// MaxConcurrentUpgrades is how many RedisPersistences at most roll an
	// upgrade that comes from the operator rather than their spec (at least 1).
	MaxConcurrentUpgrades int
	Recorder              record.EventRecorder
	Clock                 clock.PassiveClock
	// ArchiveCheckEvery is how often the operator reads the archive of an
	// instance with spec.backup.archive (a minute when 0).
	ArchiveCheckEvery time.Duration
	// ServerAddress is where the operator reaches a server pod (pod IP and port by default).
	ServerAddress func(*corev1.Pod) string
	// SentinelAddress is where the operator reaches a Sentinel pod (pod IP and port by default).
	SentinelAddress func(*corev1.Pod) string

	snapshots snapshots
	probes    serverProbes
	// switchovers spaces the attempts at a switchover that failed.
	switchovers switchoverBackoff
	// drains holds when the shards being removed served their last slot.
	drains clusterDrains

	// upgradeDecisions serializes the decisions that start an operator upgrade:
	// each reads the others' from the cache (redispersistence_upgrade.go).
	upgradeDecisions sync.Mutex

	// controller and cache let the reconciler watch PodMonitors once their
	// kind is served, which may be after the operator started.
	controller         controller.Controller
	cache              cache.Cache
	watchingPodMonitor atomic.Bool
	watchMu            sync.Mutex
}

// patch records AnnotationPredatesClosedDefaults.
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redispersistences,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redispersistences/status,verbs=get;patch;update
// delete: the Sentinels' StatefulSet and Services of an instance scaled to one server.
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// Pods: patch labels a replicated server's pod with its role.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// Secrets: get for the password (read uncached), list and watch for a
// metadata-only informer that tells when a password changes, create for the
// generated passwords, patch to apply the connection Secrets and the users'
// Secret, delete for the connection Secret of a user removed from spec.users.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// The data claim, read uncached: is there data a mode change must carry, has
// it the size spec.storage.size asks for? patch expands it.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;patch
// The claim's StorageClass, read uncached: does it allow volume expansion?
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=podmonitors,verbs=get;list;watch;create;patch;delete
// The cert-manager Certificate of spec.tls.issuerRef, applied.
// delete: once spec.tls names no issuer.
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;create;patch;delete
// The RedisBackup spec.bootstrap.recovery restores, read.
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbackups,verbs=get;list;watch
// The storage probe Jobs of spec.storage.probeInterval.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch

// Reconcile brings a RedisPersistence's servers to its spec in phases: fetch,
// read credentials, observe, converge (mode, objects, runtime options,
// certificate), report. A phase that cannot go on returns when to look again;
// the deferred status patch records every outcome.
func (r *RedisPersistenceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()

	rp, err := r.fetch(ctx, req.NamespacedName)
	if rp == nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if resync := failoverResync(rp); resync > 0 && retErr == nil {
			result = requeueWithin(result, resync)
		}
	}()
	if err := r.recordPredatedDefaults(ctx, rp); err != nil {
		return ctrl.Result{}, err
	}
	original := rp.DeepCopy()
	// What a served instance goes through: the status patch names it.
	var moving v1alpha1.InstancePhase
	defer func() { retErr = r.patchStatus(ctx, rp, original, moving, retErr) }()

	creds, wait, err := r.readCredentials(ctx, rp)
	if creds == nil {
		return wait, err
	}
	if ready, requeue, err := r.resolveRecovery(ctx, rp); !ready {
		// The RedisBackup watch brings the instance back; an archive is
		// read again after requeue.
		return ctrl.Result{RequeueAfter: requeue}, err
	}
	// Before anything observes the servers: the roles and the Service follow
	// the new primary in this reconcile.
	if err := r.switchOverOnRequest(ctx, rp, creds.server); err != nil {
		return ctrl.Result{}, err
	}
	in := creds.podInputs(rp)
	// Every request to the servers in this reconcile shares one deadline.
	serverCtx, cancelServer := context.WithTimeout(ctx, serverBudget)
	defer cancelServer()
	if again := r.rotatePassword(serverCtx, rp, creds); again > 0 {
		defer func() { result = requeueWithin(result, again) }()
	}
	obs, err := r.observe(ctx, serverCtx, rp, creds.server, in)
	if err != nil {
		return ctrl.Result{}, err
	}

	// While a mode change is held nothing is applied: a server started from
	// the new objects would not find the data.
	var retry ctrl.Result
	if obs.modeChange, retry = r.convergeMode(serverCtx, rp, creds.server, obs); obs.modeChange != nil {
		r.updateStatus(rp, obs)
		return retry, nil
	}
	heldUpgrade, err := r.apply(ctx, rp, creds, in, &obs)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs.configErr = r.convergeRuntimeConfig(serverCtx, rp, creds.server, obs)
	again, tlsRotating, err := r.convergeAccess(serverCtx, rp, creds)
	if err != nil {
		return ctrl.Result{}, err
	}
	if again > 0 {
		defer func() { result = requeueWithin(result, again) }()
	}
	if specs.Sharded(rp) {
		// What only a cluster needs: its nodes met, slots shared and moved,
		// roles labelled (redispersistence_cluster.go).
		if obs.cluster, err = r.convergeShards(ctx, rp, creds.server, obs.shards); err != nil {
			return ctrl.Result{}, err
		}
	}
	result, err = r.report(ctx, rp, obs, heldUpgrade, tlsRotating)
	moving = r.motion(rp, obs)
	return result, err
}

// failoverResync is how often an instance whose servers fail over by
// themselves is looked at when no Kubernetes object changes (0: never): a
// failover changes none while the old primary keeps running.
func failoverResync(rp *v1alpha1.RedisPersistence) time.Duration {
	switch {
	case specs.Sharded(rp):
		return clusterResync
	case specs.Replicated(rp):
		return replicationResync
	}
	return 0
}

// rotatePassword brings the running servers to the default password creds
// holds (rotateDefaultPassword) and returns when to look again: when the
// previous password stops working, or soon after a failure; 0 when no
// rotation is in progress.
func (r *RedisPersistenceReconciler) rotatePassword(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials) time.Duration {
	rotating, err := r.rotateDefaultPassword(ctx, rp, creds)
	if err != nil {
		log.FromContext(ctx).Info("rotating the default password failed", "redispersistence", klogRef(rp), "err", err)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedRotatePassword", "%v", err)
		return 10 * time.Second
	}
	if rotating > 0 {
		return max(rotating, time.Second)
	}
	return 0
}

// convergeAccess brings the running servers to spec.users and to the
// certificate of spec.tls. again is when a user's previous password stops
// working (0: none does); tlsRotating says a server still serves an old
// certificate.
func (r *RedisPersistenceReconciler) convergeAccess(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials) (again time.Duration, tlsRotating bool, err error) {
	if expiry := r.convergeUsers(ctx, rp, creds); !expiry.IsZero() {
		// Wall-clock time, see readUsers.
		again = max(time.Until(expiry), time.Second)
	}
	tlsRotating, err = r.convergeCertificate(ctx, rp, creds)
	return again, tlsRotating, err
}

// fetch reads the RedisPersistence to reconcile, or nil once it is gone or
// going: the garbage collector removes the objects the operator made, all
// owned by it; fetch forgets what the operator holds in memory.
func (r *RedisPersistenceReconciler) fetch(ctx context.Context, key types.NamespacedName) (*v1alpha1.RedisPersistence, error) {
	rp := &v1alpha1.RedisPersistence{}
	err := r.Get(ctx, key, rp)
	// The cache may lag the status this operator wrote a moment ago. The
	// restore's steps are done once (status.recovery fixed, then restoredAt
	// and the ConfigMap emptied): redone from a stale copy, a reconcile would
	// name the backup in <name>-recovery again, to be restored into a volume
	// that starts later. So is a switchover asked for answered once: from a
	// copy without the answer, a switchover to any replica would run twice.
	// While one is pending the instance is read from the API server, which
	// has every write this operator made.
	if rec := rp.Status.Recovery; err == nil && rp.Spec.Bootstrap != nil && (rec == nil || rec.RestoredAt == nil) {
		err = r.APIReader.Get(ctx, key, rp)
	} else if _, asked := specs.SwitchoverRequestOf(rp); err == nil && asked {
		err = r.APIReader.Get(ctx, key, rp)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
		}
		return nil, client.IgnoreNotFound(err)
	}
	if !rp.DeletionTimestamp.IsZero() {
		r.forget(key)
		return nil, nil
	}
	return rp, nil
}

// forget drops an instance's metric series and what the operator knows of its server.
func (r *RedisPersistenceReconciler) forget(key types.NamespacedName) {
	forgetInstanceMetrics(key.Namespace, key.Name)
	r.probes.drop(key)
	r.switchovers.forget(key)
}

// credentials are the secrets an instance's servers start with.
type credentials struct {
	password string
	users    specs.ACLPasswords
	// aclSecret is <name>-acl as read this reconcile; nil when just made.
	aclSecret *corev1.Secret
	// appUsers are spec.users' passwords; nil for an instance that never had users.
	appUsers *appUsers
	certs    *tlsMaterial // nil without spec.tls
	// server is what the operator presents to the servers.
	server serverCredentials
}

// podInputs are the inputs of rp's pod templates, with the hashes of the
// credentials they run with.
func (c *credentials) podInputs(rp *v1alpha1.RedisPersistence) specs.PodInputs {
	in := specs.NewPodInputs(rp, c.password)
	in.ACLHash = c.users.Hash(rp)
	if c.certs != nil {
		in.TLSHash = c.certs.hash
	}
	return in
}

// readCredentials reads the password, the ACL users' passwords and the TLS
// certificate. It returns nil, and when to look again, while one the servers
// cannot start without is missing.
func (r *RedisPersistenceReconciler) readCredentials(ctx context.Context, rp *v1alpha1.RedisPersistence) (*credentials, ctrl.Result, error) {
	if specs.AuthSourceOf(rp) == specs.AuthDisabled && rp.Status.ObservedGeneration != rp.Generation {
		r.Recorder.Event(rp, corev1.EventTypeWarning, "RunningWithoutPassword", "spec.auth.disabled: the server runs without a password; any client that reaches its port can read and write every key")
	}
	password, err := r.password(ctx, rp)
	var users specs.ACLPasswords
	var aclSecret *corev1.Secret
	if err == nil {
		users, aclSecret, err = r.aclPasswords(ctx, rp)
	}
	if errors.Is(err, errAuthSecret) {
		// Nothing can start without the password; the Secret watch brings the
		// RedisPersistence back when the Secret appears or changes.
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, ReasonAuthSecretMissing, err.Error()})
		r.Recorder.Event(rp, corev1.EventTypeWarning, "FailedReadPassword", err.Error())
		return nil, ctrl.Result{}, nil
	} else if err != nil {
		return nil, ctrl.Result{}, err
	}
	creds := &credentials{password: password, users: users, aclSecret: aclSecret, server: serverCredentials{password: password}}
	if creds.appUsers, err = r.readUsers(ctx, rp); err != nil {
		return nil, ctrl.Result{}, err
	}
	if err := r.removeCertificate(ctx, rp); err != nil {
		return nil, ctrl.Result{}, err
	}
	if !specs.TLSEnabled(rp) {
		meta.RemoveStatusCondition(&rp.Status.Conditions, v1alpha1.ConditionTLSReady)
		rp.Status.TLS = nil
		return creds, ctrl.Result{}, nil
	}
	certs, missing, err := r.readTLS(ctx, rp)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if missing != nil {
		// The server cannot start without its certificate; the Secret
		// watch brings the RedisPersistence back when it appears or
		// changes. Nothing watches cert-manager being installed.
		r.setCondition(rp, v1alpha1.ConditionTLSReady, *missing)
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, missing.reason, "the server waits for its TLS certificate: " + missing.message})
		if missing.reason == ReasonTLSSecretInvalid {
			r.Recorder.Event(rp, corev1.EventTypeWarning, "FailedReadCertificate", missing.message)
		}
		if missing.reason == ReasonCertManagerMissing {
			return nil, ctrl.Result{RequeueAfter: resyncInterval}, nil
		}
		return nil, ctrl.Result{}, nil
	}
	creds.certs, creds.server.tls = certs, certs.client
	return creds, ctrl.Result{}, nil
}

// observe reads what runs: the nodes rp's pods may go to, the StatefulSet,
// the mode of the ConfigMap last applied, and the server pod (observePod).
func (r *RedisPersistenceReconciler) observe(ctx, serverCtx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, in specs.PodInputs) (observation, error) {
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return observation{}, fmt.Errorf("listing nodes: %w", err)
	}
	var existing *appsv1.StatefulSet
	var shards map[int]*appsv1.StatefulSet
	var err error
	if specs.Sharded(rp) {
		shards, err = r.shardStatefulSets(ctx, rp)
	} else {
		existing, err = r.statefulSet(ctx, rp)
	}
	if err != nil {
		return observation{}, err
	}
	appliedConfig := &corev1.ConfigMap{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: specs.ConfigMapName(rp)}, appliedConfig); apierrors.IsNotFound(err) {
		appliedConfig = nil
	} else if err != nil {
		return observation{}, fmt.Errorf("reading ConfigMap %s: %w", specs.ConfigMapName(rp), err)
	}

	template := specs.PodTemplate(rp, r.Options, in)
	obs := observation{
		eligibleNodes: eligibleNodes(nodes.Items, &template.Spec),
		requirement:   placementRequirement(specs.MinKernel(rp), rp.Spec.Placement.NodeSelector),
		statefulSet:   existing,
		shards:        shards,
		appliedMode:   appliedMode(appliedConfig),
	}
	obs.antiAffinity = specs.PodAntiAffinityFor(rp, obs.eligibleNodes, existing)
	if err := r.observePod(ctx, serverCtx, rp, creds, &obs); err != nil {
		return observation{}, err
	}
	return obs, nil
}

// statefulSet is the StatefulSet of an instance that is not sharded, nil
// before it is made.
func (r *RedisPersistenceReconciler) statefulSet(ctx context.Context, rp *v1alpha1.RedisPersistence) (*appsv1.StatefulSet, error) {
	existing := &appsv1.StatefulSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: rp.Name}, existing); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading StatefulSet %s: %w", rp.Name, err)
	}
	return existing, nil
}

// observePod gathers the first server's pod, its node, its filesystem report
// and, once it is ready, the server's INFO (at most once per infoMaxAge,
// within serverCtx). A cluster's servers are read by observeCluster.
func (r *RedisPersistenceReconciler) observePod(ctx, serverCtx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, obs *observation) error {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: specs.FirstPodName(rp)}, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	obs.pod = pod
	var probe storageReport
	if rp.Spec.Storage != nil && rp.Spec.Storage.ProbeInterval != nil {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(rp.Namespace), client.MatchingLabels{specs.LabelJobName: specs.StorageProbeJobName(rp)}); err != nil {
			return fmt.Errorf("listing the storage probe's pods: %w", err)
		}
		probe = storageReportFromProbePods(pods.Items)
	}
	obs.storage = newestStorageReport(storageReportFromPod(pod), probe, storageReportFromStatus(rp.Status.Storage))
	if pod.Spec.NodeName != "" {
		node := &corev1.Node{}
		if err := r.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); client.IgnoreNotFound(err) != nil {
			return err
		} else if err == nil {
			obs.node = node
		}
	}
	if !podReady(pod) || pod.Status.PodIP == "" || specs.Sharded(rp) {
		return nil
	}
	obs.info, obs.infoErr = r.probes.info(serverCtx, client.ObjectKeyFromObject(rp), pod, func(ctx context.Context) (*serverInfo, error) {
		return readServerInfo(ctx, r.ServerAddress(pod), creds)
	})
	if obs.infoErr != nil {
		obs.unreachableFor = r.probes.unreachableFor(client.ObjectKeyFromObject(rp))
		log.FromContext(ctx).Info("reading server INFO failed", "pod", klogRef(pod), "err", obs.infoErr, "for", obs.unreachableFor.Round(time.Second))
	}
	return nil
}

// apply brings the objects to what rp asks, the data volumes' size too. The
// topology supplies the StatefulSets (members), which go through the same
// apply: an operator upgrade that must wait for its turn leaves them as they
// are and is returned, held.
func (r *RedisPersistenceReconciler) apply(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials, in specs.PodInputs, obs *observation) (*upgradeWait, error) {
	if err := r.applyObjects(ctx, rp, creds); err != nil {
		return nil, err
	}
	// The StatefulSets go last: their pods start from the ConfigMap applied above.
	var members []member
	var err error
	if specs.Sharded(rp) {
		members = r.shardMembers(rp, creds.server, obs)
	} else if members, err = r.serverMembers(ctx, rp, creds.server, obs); err != nil {
		return nil, err
	}
	applied, heldUpgrade, err := r.applyStatefulSets(ctx, rp, in, members)
	if err != nil {
		return nil, err
	}
	if heldUpgrade != nil {
		obs.upgradePending = &heldUpgrade.condition
	}
	if specs.Sharded(rp) {
		for i, sts := range applied {
			obs.shards[i] = sts
		}
	} else {
		obs.statefulSet = applied[0]
	}
	if specs.Replicated(rp) {
		if err := r.followSentinels(ctx, rp, creds.server, in, obs); err != nil {
			return nil, err
		}
	}

	if err := r.reportVolumeSize(ctx, rp); err != nil {
		return nil, err
	}
	return heldUpgrade, nil
}

// serverMembers is the one StatefulSet of an instance that is not sharded:
// for a replicated one, with as many servers as a scale-in may remove yet
// (serversToRun) and rolled by the Sentinels' switchover.
func (r *RedisPersistenceReconciler) serverMembers(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, obs *observation) ([]member, error) {
	var servers int32
	if specs.Replicated(rp) {
		var err error
		if servers, err = r.serversToRun(ctx, rp, creds, obs.statefulSet); err != nil {
			return nil, err
		}
	}
	antiAffinity := obs.antiAffinity
	return []member{{
		existing: obs.statefulSet,
		build: func(in specs.PodInputs) *appsv1.StatefulSet {
			in.AntiAffinity, in.Servers = antiAffinity, servers
			return specs.StatefulSet(rp, r.Options, in)
		},
		roller: &sentinelRoller{r: r, rp: rp, creds: creds},
	}}, nil
}

// applyObjects applies every object rp asks for but the StatefulSets, and
// deletes the ones it no longer asks for. The connection Secret is among
// them: it hands on creds.
func (r *RedisPersistenceReconciler) applyObjects(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials) error {
	desired := []client.Object{
		specs.ConfigMap(rp, specs.RenderConfig(rp)),
		specs.HeadlessService(rp),
		specs.ClientService(rp),
	}
	if conn, err := r.connectionSecret(ctx, rp, creds); err != nil {
		return err
	} else if conn != nil {
		desired = append(desired, conn)
	}
	users, err := r.userObjects(ctx, rp, creds)
	if err != nil {
		return err
	}
	desired = append(desired, users...)
	recovery, err := r.recoveryObjects(ctx, rp)
	if err != nil {
		return err
	}
	desired = append(desired, recovery...)
	if specs.NetworkPolicyEnabled(rp, r.Options.NetworkPolicy) {
		desired = append(desired, specs.NetworkPolicy(rp, r.Options.NetworkPolicy))
	} else if err := r.removeNetworkPolicy(ctx, rp); err != nil {
		return err
	}
	replication, err := r.replicationObjects(ctx, rp)
	if err != nil {
		return err
	}
	desired = append(desired, replication...)
	for _, pdb := range specs.ShardPodDisruptionBudgets(rp) {
		desired = append(desired, pdb)
	}
	if pm, err := r.podMonitor(ctx, rp); err != nil {
		return err
	} else if pm != nil {
		desired = append(desired, pm)
	}
	for _, obj := range desired {
		if err := r.Patch(ctx, obj, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApply", "applying %s %s: %v", kind, obj.GetName(), err)
			return fmt.Errorf("applying %s %s: %w", kind, obj.GetName(), err)
		}
	}
	return nil
}

// report writes what the reconcile observed into rp's status, starts the
// storage probe that is due and says when to look again.
func (r *RedisPersistenceReconciler) report(ctx context.Context, rp *v1alpha1.RedisPersistence, obs observation, heldUpgrade *upgradeWait, tlsRotating bool) (ctrl.Result, error) {
	// Before updateStatus, which exports the metrics of what it read.
	archiveIn := r.observeArchive(ctx, rp)
	if err := r.observeLastBackup(ctx, rp); err != nil {
		return ctrl.Result{}, err
	}
	r.updateStatus(rp, obs)
	if err := r.finishRecovery(ctx, rp); err != nil {
		return ctrl.Result{}, err
	}
	// A probe is due by the measurement updateStatus just recorded.
	probeIn, err := r.reprobeStorage(ctx, rp, obs.pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	result := ctrl.Result{RequeueAfter: requeueAfter(rp, obs, heldUpgrade, tlsRotating, probeIn, r.Clock.Now())}
	if archiveIn > 0 {
		result = requeueWithin(result, archiveIn)
	}
	if obs.configErr != nil && !refusedByServer(obs.configErr) {
		// A server that did not answer is asked again soon; one that
		// refused an option waits for the next spec change or resync.
		result = requeueWithin(result, configRetry)
	}
	if obs.cluster != nil && obs.cluster.step.requeue > 0 {
		result = requeueWithin(result, obs.cluster.step.requeue)
	}
	return result, nil
}

func klogRef(obj client.Object) string { return client.ObjectKeyFromObject(obj).String() }

// SetupWithManager watches RedisPersistences, what they own, their pods and nodes.
func (r *RedisPersistenceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	// The INFO rate limit runs on real time even where a test fixes Clock.
	r.probes.clock = clock.RealClock{}
	if r.ServerAddress == nil {
		r.ServerAddress = func(pod *corev1.Pod) string {
			return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(specs.RedisPort))
		}
	}
	if r.SentinelAddress == nil {
		r.SentinelAddress = func(pod *corev1.Pod) string {
			return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(specs.SentinelPort))
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.RedisPersistence{}, secretIndex, usedSecretNames); err != nil {
		return err
	}
	r.cache = mgr.GetCache()
	c, err := ctrl.NewControllerManagedBy(mgr).
		// Annotations too: removing AnnotationPredatesClosedDefaults closes the server.
		For(&v1alpha1.RedisPersistence{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// The connection Secret: a hand edit brings its instance back, which
		// puts the keys back. Metadata only, from the Secrets' one informer.
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		// Pods belong to the StatefulSet; the instance label leads back to the RedisPersistence.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToRedisPersistence), builder.WithPredicates(managedPods)).
		// Only the Secrets' metadata is cached: a new resourceVersion is all
		// the operator needs to know that a password may have changed.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.usersOfSecret)).
		// A node that appears or changes labels can make a waiting server schedulable.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allRedisPersistences), builder.WithPredicates(nodeChanged)).
		// A backup that completes is its instance's last one, and lets the
		// instances that restore it start.
		Watches(&v1alpha1.RedisBackup{}, handler.EnqueueRequestsFromMapFunc(r.instancesOfBackup)).
		// An operator upgrade that ends frees a turn for the next ones waiting.
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.nextUpgrades), builder.WithPredicates(upgradeTurnFreed)).
		// So does a stalled one that a person releases.
		Watches(&v1alpha1.RedisPersistence{}, handler.EnqueueRequestsFromMapFunc(r.nextUpgrades), builder.WithPredicates(upgradeReleaseAnnotated)).
		Build(r)
	r.controller = c
	return err
}

var managedPods = predicate.NewPredicateFuncs(func(obj client.Object) bool {
	return obj.GetLabels()[specs.LabelManagedBy] == specs.FieldOwner
})

var nodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
			e.ObjectOld.(*corev1.Node).Spec.Unschedulable != e.ObjectNew.(*corev1.Node).Spec.Unschedulable
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func podToRedisPersistence(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[specs.LabelInstance]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

func usedSecretNames(obj client.Object) []string {
	rp := obj.(*v1alpha1.RedisPersistence)
	var names []string
	if ref := specs.AuthSecretRef(rp); ref != nil {
		names = append(names, ref.Name)
	}
	if specs.ACLUsersEnabled(rp) {
		names = append(names, specs.ACLSecretName(rp))
	}
	if name := specs.TLSSecretName(rp); name != "" {
		names = append(names, name)
	}
	for i := range rp.Spec.Users {
		names = append(names, specs.UserPasswordRef(rp, &rp.Spec.Users[i]).Name)
	}
	return names
}

func (r *RedisPersistenceReconciler) usersOfSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	var list v1alpha1.RedisPersistenceList
	if err := r.List(ctx, &list, client.InNamespace(secret.GetNamespace()), client.MatchingFields{secretIndex: secret.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "listing the RedisPersistences that use a Secret", "secret", klogRef(secret))
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for _, rp := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rp)})
	}
	return requests
}

func (r *RedisPersistenceReconciler) allRedisPersistences(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.RedisPersistenceList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing RedisPersistences for a node change")
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for _, rp := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rp)})
	}
	return requests
}
