-- +goose Up
-- Holds (issue 13): a graduated step that stops new admissions on a live
-- connection's Kueue queue (spec.stopPolicy), confirmed by an admin.
--   connections.hold: where the hold is. '' none; 'proposed': someone (a
--     reviewer's decision, or the contract's end date passing) asks for a
--     hold and an admin must confirm or decline it; 'hold': confirmed,
--     stopPolicy Hold (admitted workloads run to completion); 'drain': an
--     admin explicitly confirmed HoldAndDrain (admitted workloads are
--     evicted). Release goes back to ''.
--   hold_by / hold_by_id / hold_reason / hold_at: who moved the hold last,
--     why and when ('' / 0 for none; hold_by_id 0 is the system).
--   jobs.kind 'hold': the job that server-side applies the stopPolicy the
--     connection's hold says to its queues; jobs.stop_policy is that value
--     (None, Hold, HoldAndDrain; '' for every other kind).
--   hold_notices: what the end-date rule already did for a connection's end
--     date (notice_14, notice_3, passed), so that it does each once, across
--     restarts; a new end date (a renewal) starts over.
ALTER TABLE connections ADD COLUMN hold TEXT NOT NULL DEFAULT ''
    CHECK (hold IN ('', 'proposed', 'hold', 'drain'));
ALTER TABLE connections ADD COLUMN hold_by TEXT NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN hold_by_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE connections ADD COLUMN hold_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN hold_at TEXT NOT NULL DEFAULT '';
-- The admin queue lists proposed holds.
CREATE INDEX connections_hold ON connections (hold, id) WHERE hold != '';

CREATE TABLE hold_notices (
    connection_id INTEGER NOT NULL REFERENCES connections (id),
    end_date      TEXT NOT NULL,
    stage         TEXT NOT NULL CHECK (stage IN ('notice_14', 'notice_3', 'passed')),
    created_at    TEXT NOT NULL,
    PRIMARY KEY (connection_id, end_date, stage)
);

-- The jobs kind CHECK is widened: SQLite cannot change a CHECK in place, so
-- the table is rebuilt exactly as 00010 did (see its comment on
-- defer_foreign_keys: job_steps and aws_resources reference jobs (id)), with
-- from_version (00011) and the new stop_policy. No trigger is defined on
-- jobs; its indexes are recreated as they were.
-- +dialect sqlite
PRAGMA defer_foreign_keys = ON;
CREATE TABLE jobs_old AS SELECT * FROM jobs;
DROP TABLE jobs;
CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    connection_id     INTEGER REFERENCES connections (id),
    cluster           TEXT NOT NULL DEFAULT '',
    kind              TEXT NOT NULL CHECK (kind IN ('provision', 'revoke', 'reapply', 'amend', 'scheduler', 'hold')),
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
    from_version      INTEGER NOT NULL DEFAULT 0,
    stop_policy       TEXT NOT NULL DEFAULT '' CHECK (stop_policy IN ('', 'None', 'Hold', 'HoldAndDrain')),
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version),
    CHECK ((kind = 'scheduler') = (connection_id IS NULL)),
    CHECK ((connection_id IS NULL) = (cluster != '')),
    CHECK (connection_id IS NOT NULL OR version = 0),
    CHECK ((kind = 'hold') = (stop_policy != ''))
);
INSERT INTO jobs (id, connection_id, cluster, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
                  lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at, from_version)
SELECT id, connection_id, cluster, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
       lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at, from_version
FROM jobs_old;
DROP TABLE jobs_old;
CREATE INDEX jobs_queued ON jobs (not_before, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (lease_until, id) WHERE state = 'running';
CREATE INDEX jobs_connection ON jobs (connection_id, id);
CREATE UNIQUE INDEX jobs_one_open ON jobs (connection_id, kind) WHERE state IN ('queued', 'running');
CREATE UNIQUE INDEX jobs_one_open_cluster ON jobs (cluster, kind) WHERE connection_id IS NULL AND state IN ('queued', 'running');
CREATE INDEX jobs_cluster ON jobs (kind, id) WHERE connection_id IS NULL;
-- +dialect postgres
-- PostgreSQL changes the table in place (see 00010).
ALTER TABLE jobs ADD COLUMN stop_policy TEXT NOT NULL DEFAULT '' CHECK (stop_policy IN ('', 'None', 'Hold', 'HoldAndDrain'));
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('provision', 'revoke', 'reapply', 'amend', 'scheduler', 'hold'));
ALTER TABLE jobs ADD CONSTRAINT jobs_hold_check CHECK ((kind = 'hold') = (stop_policy != ''));
-- +dialect end

-- +goose Down
-- +dialect sqlite
PRAGMA defer_foreign_keys = ON;
-- +dialect end
DELETE FROM job_steps WHERE job_id IN (SELECT id FROM jobs WHERE kind = 'hold');
DELETE FROM jobs WHERE kind = 'hold';
-- +dialect sqlite
CREATE TABLE jobs_old AS SELECT * FROM jobs;
DROP TABLE jobs;
CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    connection_id     INTEGER REFERENCES connections (id),
    cluster           TEXT NOT NULL DEFAULT '',
    kind              TEXT NOT NULL CHECK (kind IN ('provision', 'revoke', 'reapply', 'amend', 'scheduler')),
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
    from_version      INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version),
    CHECK ((kind = 'scheduler') = (connection_id IS NULL)),
    CHECK ((connection_id IS NULL) = (cluster != '')),
    CHECK (connection_id IS NOT NULL OR version = 0)
);
INSERT INTO jobs (id, connection_id, cluster, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
                  lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at, from_version)
SELECT id, connection_id, cluster, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
       lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at, from_version
FROM jobs_old;
DROP TABLE jobs_old;
CREATE INDEX jobs_queued ON jobs (not_before, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (lease_until, id) WHERE state = 'running';
CREATE INDEX jobs_connection ON jobs (connection_id, id);
CREATE UNIQUE INDEX jobs_one_open ON jobs (connection_id, kind) WHERE state IN ('queued', 'running');
CREATE UNIQUE INDEX jobs_one_open_cluster ON jobs (cluster, kind) WHERE connection_id IS NULL AND state IN ('queued', 'running');
CREATE INDEX jobs_cluster ON jobs (kind, id) WHERE connection_id IS NULL;
-- +dialect postgres
ALTER TABLE jobs DROP CONSTRAINT jobs_hold_check;
ALTER TABLE jobs DROP COLUMN stop_policy;
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('provision', 'revoke', 'reapply', 'amend', 'scheduler'));
-- +dialect end
DROP TABLE hold_notices;
DROP INDEX connections_hold;
ALTER TABLE connections DROP COLUMN hold_at;
ALTER TABLE connections DROP COLUMN hold_reason;
ALTER TABLE connections DROP COLUMN hold_by_id;
ALTER TABLE connections DROP COLUMN hold_by;
ALTER TABLE connections DROP COLUMN hold;
