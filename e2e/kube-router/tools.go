//go:build tools

// Package kuberouter pins kube-router, the NetworkPolicy enforcer of both e2e
// clusters (iptables and ipset): on the offline cluster's node, and on kind as
// its pod network too (see ../kind/README.md for why not kindnet's).
// hack/kube-router.sh builds it from this module with the host's Go toolchain. kube-router v2.1.0 is the release the module proxy serves; its
// dependencies with published advisories are raised here past the fixed
// versions, which minimal version selection then builds with.
package kuberouter

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
