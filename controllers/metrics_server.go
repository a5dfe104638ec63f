package controllers

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics endpoint asks the API server who a caller is (TokenReview) and
// whether it may get the non-resource URL /metrics (SubjectAccessReview).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// MetricsServerOptions serves the operator's metrics on bindAddress. With
// secure, over HTTPS (the certificate in certDir, tls.crt and tls.key, else a
// self-signed one) and only to a caller whose bearer token the API server
// authenticates and authorizes to get /metrics (the ClusterRole
// config/rbac/metrics_reader_role.yaml); without it, plain HTTP to anyone.
func MetricsServerOptions(bindAddress string, secure bool, certDir string) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: bindAddress}
	if !secure {
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	opts.CertDir = certDir
	// HTTP/2 stays off: its rapid-reset attacks (CVE-2023-44487, CVE-2023-39325)
	// cost a server more than a scrape gains from it.
	opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return opts
}
