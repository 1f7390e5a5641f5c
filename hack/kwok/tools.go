//go:build tools

// Package kwok pins the command that hack/testbed/cluster.sh builds, so that
// `go mod tidy` keeps it (and its checksums) in go.mod and go.sum.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
