// Package provision turns an approved connection contract into Kubernetes
// and AWS objects: pure builder functions produce the desired objects (a
// plan that can be printed and diffed), and idempotent steps apply them
// through client-go (server-side apply) and aws-sdk-go-v2, recorded in
// durable jobs.
//
// It may import internal/workflow (the approved contract is its input); it
// must never import internal/web or internal/views.
package provision
