package specs

import (
	_ "embed"

	corev1 "k8s.io/api/core/v1"
)

// measureScript reports the data volume's filesystem and measurement
// (controllers/redispersistence_storage.go) as the container's termination message.
//
//go:embed scripts/measure-volume.sh
var measureScript string

//go:embed scripts/render-auth.sh
var RenderAuthScript string

// PrepareScript runs before the server: it measures the data volume and
// renders the auth include file, the password and the ACL users
// (controllers/redispersistence_acl.go).
var PrepareScript = measureScript + RenderAuthScript

//go:embed scripts/lookups.sh
var lookupsScript string

//go:embed scripts/server-start.sh
var serverStart string

//go:embed scripts/sentinel-start.sh
var sentinelStart string

// ServerStartScript decides, at every start of a replicated instance's
// server, whether it starts as the primary or as a replica of it.
var ServerStartScript = lookupsScript + serverStart

// SentinelStartScript writes a Sentinel's configuration on its pod's first
// start and runs it.
var SentinelStartScript = lookupsScript + sentinelStart

func shellCommand(script string) []string { return []string{"sh", "-c", script} }

// measureEnv is what measureScript reads.
func measureEnv() []corev1.EnvVar {
	return []corev1.EnvVar{EnvVar("DATA_DIR", DataDir), EnvVar("FSPROBE_MILLIS", FsprobeMillis)}
}
