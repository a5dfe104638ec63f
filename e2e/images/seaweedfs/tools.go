//go:build tools

// Package seaweedfs makes `go mod tidy` keep the pinned SeaweedFS.
package seaweedfs

import _ "github.com/seaweedfs/seaweedfs/weed"
