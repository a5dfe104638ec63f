package controllers

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventBroadcaster is the operator's: client-go's, but for the key of its
// spam filter. client-go lets each object send a burst of 25 events and then
// one per 5 minutes, whatever their reasons, so an instance that logged 25
// routine events (a backup schedule's runs, a rollout's steps) loses the one
// that matters next (ExpiredBackup, FailedOver, Restarted) for minutes. Here
// the burst is per object and reason: a reason that repeats is throttled,
// and the others still arrive. Events of one reason with differing messages
// are still combined by client-go's aggregator.
//
// The broadcaster lives as long as the process, as the manager that owns
// it does (the reason controller-runtime marks the option deprecated).
func EventBroadcaster() record.EventBroadcaster {
	return record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{SpamKeyFunc: eventSpamKey})
}

func eventSpamKey(e *corev1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, string(e.InvolvedObject.UID),
		e.InvolvedObject.APIVersion, e.Type, e.Reason,
	}, "\x00")
}
