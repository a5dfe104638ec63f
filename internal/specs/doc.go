// Package specs builds the objects the operator applies for a
// RedisPersistence and a RedisBenchmark: redis.conf, the StatefulSets and
// their pod templates, the Services, Secrets, NetworkPolicies, PodMonitor and
// Jobs. Every builder is a function of the custom resource, the operator's
// Options and the inputs it is handed; none reads or writes the cluster (the
// package imports no client), so the golden files under testdata pin what
// they render. controllers/ reconciles, observes and reports status.
package specs
