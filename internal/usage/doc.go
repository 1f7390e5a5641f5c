// Package usage is the portal's metering and money, in pure functions: the
// hourly usage rows the collector records per team, namespace and instance
// type; missing data periods; sums per hour, nearest-rank percentiles and
// the quota suggestion (quota.go); the demo usage `make run` seeds
// (demo.go); and (as they arrive) prices, the shared-cost
// policy and the monthly statements computed from those rows.
//
// It imports nothing of the portal but internal/workflow, and never an HTTP,
// Kubernetes, AWS or SQL package: the collector that watches the cluster
// (internal/usage/collect) and the store that keeps the rows
// (internal/store/usage.go) depend on it, not the reverse.
package usage
