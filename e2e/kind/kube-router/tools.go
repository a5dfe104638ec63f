//go:build tools

// Package kuberouter pins kube-router, the kind test bed's pod network and
// NetworkPolicy enforcer (iptables and ipset; see ../README.md for why not
// kindnet's). e2e/kind/kind.sh builds it from this module with the host's Go
// toolchain. kube-router v2.1.0 is the release the module proxy serves; its
// dependencies with published advisories are raised here past the fixed
// versions, which minimal version selection then builds with.
package kuberouter

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
