package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRoutineEventsDoNotSilenceOthers: thirty events of one reason on an
// object (client-go's spam filter lets 25 through per key) and then one of
// another reason: that one arrives.
func TestRoutineEventsDoNotSilenceOthers(t *testing.T) {
	ns := newNamespace(t)
	object := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: ns}}
	if err := k8s.Create(context.Background(), object); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		reconciler.Recorder.Eventf(object, corev1.EventTypeNormal, "ScheduledBackup", "run %d", i)
	}
	reconciler.Recorder.Eventf(object, corev1.EventTypeNormal, "ExpiredBackup", "deleted the oldest")
	waitEvent(t, ns, "busy", "ExpiredBackup")
}
