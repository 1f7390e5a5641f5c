-- +goose Up
-- Cluster jobs: jobs that act on the cluster as a whole rather than on one
-- connection. The first is the reconcile of the cluster's HyperPod scheduler
-- config (kind 'scheduler'), which used to be an AWS call made while the
-- admin's request waited; it is now queued, claimed, retried and audited
-- like every other job. A cluster job has no connection (connection_id
-- NULL, version 0: the (connection_id, version) foreign key does not apply
-- to a row with a NULL column) and names its cluster in cluster (the
-- cluster ARN of the scheduler config); a connection job has a connection
-- and no cluster. 'amend' is the kind of the contract amendments the next
-- part of issue 11 builds; no code queues it yet.
--
-- SQLite cannot relax NOT NULL or a CHECK in place, so the table is rebuilt.
-- goose runs this file in one transaction, where PRAGMA foreign_keys cannot
-- be switched off; job_steps and aws_resources reference jobs (id), so
-- dropping the old table would fail their foreign keys at once.
-- defer_foreign_keys (reset at commit) moves the check to the commit
-- instead: the DROP counts the orphaned steps and resources, and the INSERT
-- into the new jobs table, under the same name and with the same ids, finds
-- their parents again, so the commit sees no violation. The old rows are
-- kept in jobs_old until then.
-- +dialect sqlite
PRAGMA defer_foreign_keys = ON;
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
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version),
    -- A cluster job (scheduler) has no connection and names its cluster;
    -- every other kind belongs to a connection.
    CHECK ((kind = 'scheduler') = (connection_id IS NULL)),
    CHECK ((connection_id IS NULL) = (cluster != '')),
    CHECK (connection_id IS NOT NULL OR version = 0)
);
INSERT INTO jobs (id, connection_id, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
                  lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at)
SELECT id, connection_id, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
       lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at
FROM jobs_old;
DROP TABLE jobs_old;
-- The indexes of 00003, as they were.
CREATE INDEX jobs_queued ON jobs (not_before, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (lease_until, id) WHERE state = 'running';
CREATE INDEX jobs_connection ON jobs (connection_id, id);
CREATE UNIQUE INDEX jobs_one_open ON jobs (connection_id, kind) WHERE state IN ('queued', 'running');
-- +dialect postgres
-- PostgreSQL changes the table in place (the foreign keys to it follow, and
-- its indexes stay); the new constraints are named for the Down.
ALTER TABLE jobs ALTER COLUMN connection_id DROP NOT NULL;
ALTER TABLE jobs ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('provision', 'revoke', 'reapply', 'amend', 'scheduler'));
ALTER TABLE jobs ADD CONSTRAINT jobs_scheduler_check CHECK ((kind = 'scheduler') = (connection_id IS NULL));
ALTER TABLE jobs ADD CONSTRAINT jobs_cluster_check CHECK ((connection_id IS NULL) = (cluster != ''));
ALTER TABLE jobs ADD CONSTRAINT jobs_version_check CHECK (connection_id IS NOT NULL OR version = 0);
-- +dialect end
-- At most one unfinished job of each kind per cluster: jobs_one_open does
-- not cover cluster jobs, as a unique index treats NULLs as distinct.
CREATE UNIQUE INDEX jobs_one_open_cluster ON jobs (cluster, kind) WHERE connection_id IS NULL AND state IN ('queued', 'running');
-- A cluster's jobs, newest first (the scheduler page).
CREATE INDEX jobs_cluster ON jobs (kind, id) WHERE connection_id IS NULL;

-- +goose Down
-- Cluster jobs (and their steps) cannot go back into a table without them.
-- +dialect sqlite
PRAGMA defer_foreign_keys = ON;
-- +dialect end
DELETE FROM job_steps WHERE job_id IN (SELECT id FROM jobs WHERE connection_id IS NULL OR kind = 'amend');
DELETE FROM jobs WHERE connection_id IS NULL OR kind = 'amend';
-- +dialect sqlite
CREATE TABLE jobs_old AS SELECT * FROM jobs;
DROP TABLE jobs;
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
INSERT INTO jobs (id, connection_id, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
                  lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at)
SELECT id, connection_id, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
       lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at
FROM jobs_old;
DROP TABLE jobs_old;
CREATE INDEX jobs_queued ON jobs (not_before, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (lease_until, id) WHERE state = 'running';
CREATE INDEX jobs_connection ON jobs (connection_id, id);
CREATE UNIQUE INDEX jobs_one_open ON jobs (connection_id, kind) WHERE state IN ('queued', 'running');
-- +dialect postgres
DROP INDEX jobs_cluster;
DROP INDEX jobs_one_open_cluster;
ALTER TABLE jobs DROP CONSTRAINT jobs_scheduler_check;
ALTER TABLE jobs DROP CONSTRAINT jobs_cluster_check;
ALTER TABLE jobs DROP CONSTRAINT jobs_version_check;
ALTER TABLE jobs DROP COLUMN cluster;
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('provision', 'revoke', 'reapply'));
ALTER TABLE jobs ALTER COLUMN connection_id SET NOT NULL;
-- +dialect end
