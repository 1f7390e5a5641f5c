-- +goose Up
-- Usage (issue 12): what the collector integrated from the cluster, per
-- team, namespace, instance type and UTC hour (internal/usage.Hour), per
-- cluster instance type and hour (capacity and allocation: idle), and the
-- periods it could not recover. Quantities are exact integers of seconds.
-- source: 'cluster' (the collector) or 'demo' (seeded by make run, and
-- labelled so on every page).
CREATE TABLE usage_hours (
    team            TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    instance_type   TEXT NOT NULL,
    hour            TEXT NOT NULL,
    guaranteed_accel_s INTEGER NOT NULL DEFAULT 0 CHECK (guaranteed_accel_s >= 0),
    borrowed_accel_s   INTEGER NOT NULL DEFAULT 0 CHECK (borrowed_accel_s >= 0),
    cpu_milli_s     INTEGER NOT NULL DEFAULT 0 CHECK (cpu_milli_s >= 0),
    memory_mib_s    INTEGER NOT NULL DEFAULT 0 CHECK (memory_mib_s >= 0),
    running         INTEGER NOT NULL DEFAULT 0,
    pending         INTEGER NOT NULL DEFAULT 0,
    preempted       INTEGER NOT NULL DEFAULT 0,
    wait_p50_s      INTEGER NOT NULL DEFAULT -1,
    wait_p90_s      INTEGER NOT NULL DEFAULT -1,
    wait_p99_s      INTEGER NOT NULL DEFAULT -1,
    source          TEXT NOT NULL DEFAULT 'cluster' CHECK (source IN ('cluster', 'demo')),
    PRIMARY KEY (team, namespace, instance_type, hour)
);
-- Chargeback and the cluster pages read a period across all teams.
CREATE INDEX usage_hours_by_hour ON usage_hours (hour);

CREATE TABLE usage_cluster_hours (
    cluster         TEXT NOT NULL,
    instance_type   TEXT NOT NULL,
    hour            TEXT NOT NULL,
    capacity_accel_s  INTEGER NOT NULL DEFAULT 0 CHECK (capacity_accel_s >= 0),
    allocated_accel_s INTEGER NOT NULL DEFAULT 0 CHECK (allocated_accel_s >= 0),
    unhealthy_node_s  INTEGER NOT NULL DEFAULT 0 CHECK (unhealthy_node_s >= 0),
    source          TEXT NOT NULL DEFAULT 'cluster' CHECK (source IN ('cluster', 'demo')),
    PRIMARY KEY (cluster, instance_type, hour)
);
CREATE INDEX usage_cluster_hours_by_hour ON usage_cluster_hours (hour);

CREATE TABLE usage_missing (
    id          INTEGER PRIMARY KEY,
    cluster     TEXT NOT NULL,
    from_at     TEXT NOT NULL,
    to_at       TEXT NOT NULL,
    reason      TEXT NOT NULL,
    CHECK (from_at < to_at)
);
CREATE INDEX usage_missing_by_time ON usage_missing (to_at);

-- +goose Down
DROP TABLE usage_missing;
DROP TABLE usage_cluster_hours;
DROP TABLE usage_hours;
