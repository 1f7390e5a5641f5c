-- +goose Up
-- Durable provisioning jobs. An approval queues one in its own transaction;
-- a worker claims it with a lease (lease_owner until lease_until), and a
-- running job whose lease expired is claimed again: that is how a crash or
-- restart resumes. attempts counts claims. Times are fixed-width UTC text,
-- so comparisons and ORDER BY work on the text; '' means unset.
--   plan_hash:         the plan an approver pinned ('' when not pinned); the
--                      worker refuses to apply a different one.
--   applied_plan_hash: the plan the last attempt applied (or, in dry-run,
--                      recorded).
--   steps:             how many steps that plan has: the readiness gate
--                      wants that many done rows.
--   dry_run:           the last attempt touched no cluster.
CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    connection_id     INTEGER NOT NULL REFERENCES connections (id),
    kind              TEXT NOT NULL CHECK (kind IN ('provision', 'revoke', 'reapply')),
    version           INTEGER NOT NULL,
    plan_hash         TEXT NOT NULL DEFAULT '',
    applied_plan_hash TEXT NOT NULL DEFAULT '',
    state             TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    steps             INTEGER NOT NULL DEFAULT 0,
    lease_owner       TEXT NOT NULL DEFAULT '',
    lease_until       TEXT NOT NULL DEFAULT '',
    not_before        TEXT NOT NULL,
    last_error        TEXT NOT NULL DEFAULT '',
    dry_run           INTEGER NOT NULL DEFAULT 0 CHECK (dry_run IN (0, 1)),
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version)
);
-- Claiming reads one of two small partial indexes: queued jobs that are due,
-- and running jobs whose lease has expired.
CREATE INDEX jobs_queued ON jobs (not_before, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (lease_until, id) WHERE state = 'running';
CREATE INDEX jobs_connection ON jobs (connection_id, id);
-- At most one unfinished job of each kind per connection.
CREATE UNIQUE INDEX jobs_one_open ON jobs (connection_id, kind) WHERE state IN ('queued', 'running');

-- One row per step (plan object) of a job, updated in place when an attempt
-- re-runs it: attempts counts the runs, never duplicate rows.
CREATE TABLE job_steps (
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    seq         INTEGER NOT NULL,
    name        TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
    outcome     TEXT NOT NULL DEFAULT '',
    detail      TEXT NOT NULL DEFAULT '',
    attempts    INTEGER NOT NULL DEFAULT 0,
    started_at  TEXT NOT NULL DEFAULT '',
    finished_at TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE job_steps;
DROP TABLE jobs;
