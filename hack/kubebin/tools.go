//go:build tools

// Package kubebin pins the commands that hack/testbed/kube.sh builds, so that
// `go mod tidy` keeps them (and their checksums) in go.mod and go.sum.
package kubebin

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"

	// Only for its module: kube.sh copies the Kueue CRDs from
	// config/components/crd/bases/ of this exact, go.sum-verified version.
	// pkg/version imports nothing but the standard library.
	_ "sigs.k8s.io/kueue/pkg/version"
)
