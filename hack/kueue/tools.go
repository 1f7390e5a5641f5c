//go:build tools

// Package kueue pins the command that hack/testbed/cluster.sh builds, so that
// `go mod tidy` keeps it (and its checksums) in go.mod and go.sum. The CRDs
// kube.sh applies come from the same version (hack/kubebin pins it too; keep
// both at the same version).
package kueue

import _ "sigs.k8s.io/kueue/cmd/kueue"
