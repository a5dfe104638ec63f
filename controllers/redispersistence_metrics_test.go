package controllers

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestInstanceMetricsFollowStatus: the series the chart's
// RedisPersistenceNotReady and RedisCertificateExpiring alerts read follow
// the status the deferred patch writes, and go with the instance.
func TestInstanceMetricsFollowStatus(t *testing.T) {
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: "metrics-ns", Name: "served"}}
	l := prometheus.Labels{"namespace": "metrics-ns", "redispersistence": "served"}
	notAfter := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	rp.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReady}}
	rp.Status.TLS = &v1alpha1.TLSStatus{SecretName: "served-tls", NotAfter: &metav1.Time{Time: notAfter}}
	exportInstanceMetrics(rp)
	t.Cleanup(func() { forgetInstanceMetrics("metrics-ns", "served") })
	if got := testutil.ToFloat64(instanceReady.With(l)); got != 1 {
		t.Errorf("ready = %v while Ready is true", got)
	}
	if got := testutil.ToFloat64(tlsNotAfter.With(l)); got != float64(notAfter.Unix()) {
		t.Errorf("certificate expiry = %v, want %v", got, notAfter.Unix())
	}

	// Not ready, and TLS turned off: readiness reads 0, the expiry series goes.
	rp.Status.Conditions[0].Status, rp.Status.Conditions[0].Reason = metav1.ConditionFalse, ReasonPodNotReady
	rp.Status.TLS = nil
	exportInstanceMetrics(rp)
	if got := testutil.ToFloat64(instanceReady.With(l)); got != 0 {
		t.Errorf("ready = %v while Ready is false", got)
	}
	if hasSeries(tlsNotAfter, l) {
		t.Error("a certificate expiry series is left for an instance without TLS")
	}

	forgetInstanceMetrics("metrics-ns", "served")
	if hasSeries(instanceReady, l) {
		t.Error("the readiness series outlives its instance")
	}
}
