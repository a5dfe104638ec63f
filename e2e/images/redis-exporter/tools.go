//go:build tools

// Package redisexporter makes `go mod tidy` keep the pinned redis_exporter.
package redisexporter

import _ "github.com/oliver006/redis_exporter"
