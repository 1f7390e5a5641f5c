-- +goose Up
-- The usage collector's own records (issue 12), from which it recomputes
-- the hourly rows of 00012 and which feed the detailed task report:
-- usage_allocs: one row per pod that held resources, keyed by the pod's UID
--   (recorded again = replaced, so a restart never counts a pod twice);
--   end_at NULL while it still runs.
-- usage_workloads: one row per Kueue Workload with its waiting, admission
--   and preemption history (JSON of internal/usage.Workload's lists).
-- usage_node_spans: each node's health state and accelerators over time
--   (capacity and unhealthy node-seconds); to_at NULL for the current one.
-- usage_collector: the collector's heartbeat per cluster (who runs it, and
--   until when it is known to have watched): a restart detects the gap.
CREATE TABLE usage_allocs (
    uid             TEXT PRIMARY KEY,
    cluster         TEXT NOT NULL,
    task            TEXT NOT NULL DEFAULT '',
    pod             TEXT NOT NULL,
    team            TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    instance_type   TEXT NOT NULL,
    priority_class  TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL DEFAULT '',
    accelerators    INTEGER NOT NULL CHECK (accelerators >= 0),
    cpu_milli       INTEGER NOT NULL CHECK (cpu_milli >= 0),
    memory_mib      INTEGER NOT NULL CHECK (memory_mib >= 0),
    start_at        TEXT NOT NULL,
    end_at          TEXT CHECK (end_at IS NULL OR end_at >= start_at)
);
CREATE INDEX usage_allocs_by_start ON usage_allocs (cluster, start_at);
CREATE INDEX usage_allocs_open ON usage_allocs (cluster, end_at);

CREATE TABLE usage_workloads (
    uid             TEXT PRIMARY KEY,
    cluster         TEXT NOT NULL,
    name            TEXT NOT NULL,
    team            TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    instance_type   TEXT NOT NULL DEFAULT '',
    priority_class  TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    finished_at     TEXT,
    history         TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX usage_workloads_by_created ON usage_workloads (cluster, created_at);

CREATE TABLE usage_node_spans (
    cluster         TEXT NOT NULL,
    node            TEXT NOT NULL,
    from_at         TEXT NOT NULL,
    to_at           TEXT CHECK (to_at IS NULL OR to_at >= from_at),
    instance_type   TEXT NOT NULL,
    accelerators    INTEGER NOT NULL CHECK (accelerators >= 0),
    schedulable     INTEGER NOT NULL CHECK (schedulable IN (0, 1)),
    PRIMARY KEY (cluster, node, from_at)
);

CREATE TABLE usage_collector (
    cluster         TEXT PRIMARY KEY,
    owner           TEXT NOT NULL,
    started_at      TEXT NOT NULL,
    last_at         TEXT NOT NULL
);

-- +goose Down
DROP TABLE usage_collector;
DROP TABLE usage_node_spans;
DROP TABLE usage_workloads;
DROP TABLE usage_allocs;
