package controllers

import (
	_ "embed"

	corev1 "k8s.io/api/core/v1"

	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// The shell the pods run lives in scripts/ as files shellcheck reads (make
// lint); what a script needs to know of the instance it reads from its
// container's environment. A script reaches its container as the argument of
// sh -c, as it did when it was a Go string, rather than from a ConfigMap: the
// text is part of the pod template, so a change to a script rolls the pods
// like any other template change and every pod runs the script of the
// template it was made from, and the storage probe Job, which runs in the
// namespace on its own, needs nothing mounted.

// measureScript reports the data volume's filesystem and measurement
// (redispersistence_storage.go) as the container's termination message.
//
//go:embed scripts/measure-volume.sh
var measureScript string

//go:embed scripts/render-auth.sh
var renderAuthScript string

// prepareScript runs before the server: it measures the data volume and
// renders the auth include file, the password and the ACL users
// (redispersistence_acl.go).
var prepareScript = measureScript + renderAuthScript

//go:embed scripts/lookups.sh
var lookupsScript string

//go:embed scripts/server-start.sh
var serverStart string

//go:embed scripts/sentinel-start.sh
var sentinelStart string

// serverStartScript decides, at every start of a replicated instance's
// server, whether it starts as the primary or as a replica of it.
var serverStartScript = lookupsScript + serverStart

// sentinelStartScript writes a Sentinel's configuration on its pod's first
// start and runs it.
var sentinelStartScript = lookupsScript + sentinelStart

func shellCommand(script string) []string { return []string{"sh", "-c", script} }

// measureEnv is what measureScript reads.
func measureEnv() []corev1.EnvVar {
	return []corev1.EnvVar{specs.EnvVar("DATA_DIR", specs.DataDir), specs.EnvVar("FSPROBE_MILLIS", fsprobeMillis)}
}
