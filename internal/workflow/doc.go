// Package workflow is the portal's domain: who a principal is (roles and team
// memberships), what they may do (Decide, a pure policy function), and, as
// the product grows, the connection contract, its lifecycle state machine and
// reviews.
//
// Everything here is pure and can be read without knowing HTTP, SQL,
// Kubernetes or AWS: it must never import internal/web, internal/views,
// internal/store, internal/provision, echo, client-go or the AWS SDK. The
// clock is always passed in, never read.
package workflow
