// Package usage is the portal's metering and money, in pure functions: the
// hourly usage rows the collector records per team, namespace and instance
// type; missing data periods; sums per hour, nearest-rank percentiles and
// the quota suggestion (quota.go); each team's guarantee over time, by
// which every second is split and shared costs are weighed (guarantee.go);
// the demo usage `make run` seeds
// (demo.go); Slurm accounting records (sacct's jobs) as the same
// allocations and Workloads the EKS collector records, so that Slurm
// teams' hours are integrated and split by the same rule (slurm.go); the five watched signals of mission.md and issue 13's cost
// jump (a team's accelerator-hours week over week) evaluated over those
// rows (signals.go), allocation vs utilization also against the GPU
// utilization a Utilization returns and the floor the contract states
// (signals_utilization.go), Kueue's account of each ClusterQueue's
// borrowing against the portal's (kueueaccount.go), and their evaluation loop over the rows a
// SignalStore (internal/store) reads and records (evaluate.go: the store
// only reads and records); the Utilization interface through which pages read how
// busy a namespace's GPUs are (implemented over Prometheus by
// internal/usage/prom; nil when --prometheus-url is unset); money (integer
// minor units), the rate card (price per instance-hour over time), the
// shared-cost policies and the chargeback that splits the cluster's cost
// among the teams to the cent (chargeback.go), and the monthly statements
// computed from those rows (statement.go); HyperPod's usage reports: the
// daily summary (summary.go) and the detailed task report (taskreport.go),
// both with their missing data periods. CostsOf (costs.go) is the one
// function that computes money: it reads a period's input through the
// narrow CostReader the store implements, prices it (the rate card and
// AcceleratorsOf, the table of what one instance of each type carries) and
// charges it under the policy; the finance page, the statements and their
// exports, and the review evidence all call it, so that a period shows one
// figure everywhere.
//
// It imports nothing of the portal but internal/workflow, and never an HTTP,
// Kubernetes, AWS or SQL package: the collector that watches the cluster
// (internal/collect) and the store that keeps the rows
// (internal/store/usage.go) depend on it, not the reverse; no package
// under internal/usage imports either (cmd/portal TestImportBoundaries).
package usage
