package controllers

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// CacheOptions is what the operator's informers hold. Of the kinds the
// operator makes (StatefulSets, ConfigMaps, Services, NetworkPolicies, PodDisruptionBudgets, pods, Jobs and, where
// served, PodMonitors) only the ones it labelled managed-by itself: caching
// every pod or ConfigMap of the cluster would cost memory and list traffic in
// proportion to everything else that runs there. PodMonitors fall under the
// default selector: their kind may be served only after the operator started,
// so it cannot be named here.
//
// Cached cluster-wide, and why:
//   - RedisPersistences and RedisBenchmarks: the operator's own kinds.
//   - Nodes: placement counts every node a server could run on and follows
//     label changes; the node labeler labels every node. Their status image
//     lists are dropped.
//   - Secrets, metadata only: spec.auth names a Secret of the user's, which
//     carries no label of the operator's; a new resourceVersion is the signal
//     that a password changed. Annotations are dropped too (kubectl apply's
//     last-applied-configuration would hold the Secret's data), and the
//     password itself is read uncached. The connection Secrets the operator
//     owns are watched through the same informer.
//
// With watchNamespaces, every namespaced kind above is cached from those
// namespaces only (one informer per namespace), and the operator needs no
// cluster-wide grant on any of them; Nodes stay cluster-wide, as
// controller-runtime applies DefaultNamespaces to namespaced kinds only.
func CacheOptions(watchNamespaces []string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{specs.LabelManagedBy: specs.FieldOwner})
	everything := labels.Everything()
	var namespaces map[string]cache.Config
	if len(watchNamespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range watchNamespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	return cache.Options{
		DefaultNamespaces:    namespaces,
		DefaultLabelSelector: managed,
		DefaultTransform:     cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.StatefulSet{}:           {Label: managed},
			&corev1.ConfigMap{}:             {Label: managed},
			&corev1.Service{}:               {Label: managed},
			&networkingv1.NetworkPolicy{}:   {Label: managed},
			&policyv1.PodDisruptionBudget{}: {Label: managed},
			&corev1.Pod{}:                   {Label: managed},
			&batchv1.Job{}:                  {Label: managed},
			&v1alpha1.RedisPersistence{}:    {Label: everything},
			&v1alpha1.RedisBenchmark{}:      {Label: everything},
			&v1alpha1.RedisBackup{}:         {Label: everything},
			&corev1.Node{}:                  {Label: everything, Transform: stripNode},
			&corev1.Secret{}:                {Label: everything, Transform: stripSecretMetadata},
		},
	}
}

func stripNode(in any) (any, error) {
	if node, ok := in.(*corev1.Node); ok {
		node.ManagedFields = nil
		node.Status.Images = nil
	}
	return in, nil
}

func stripSecretMetadata(in any) (any, error) {
	if obj, ok := in.(client.Object); ok {
		obj.SetManagedFields(nil)
		obj.SetAnnotations(nil)
	}
	return in, nil
}

// ParseWatchNamespaces reads --watch-namespaces: comma-separated namespace
// names, none meaning every namespace. A name that is not a namespace's, or
// one named twice, is an error: the cache would watch a namespace that cannot
// exist, or the mistake behind the repetition would go unseen.
func ParseWatchNamespaces(flag string) ([]string, error) {
	if strings.TrimSpace(flag) == "" {
		return nil, nil
	}
	var namespaces []string
	for _, ns := range strings.Split(flag, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		if slices.Contains(namespaces, ns) {
			return nil, fmt.Errorf("%q is named twice", ns)
		}
		namespaces = append(namespaces, ns)
	}
	return namespaces, nil
}
