-- +goose Up
-- A connection is one team's request for (and later its live link to) the
-- shared cluster. Its contract lives in immutable versions; state, the
-- latest and the last approved version are denormalized here for lists.
CREATE TABLE connections (
    id               INTEGER PRIMARY KEY,
    team             TEXT NOT NULL,
    state            TEXT NOT NULL,
    cluster_name     TEXT NOT NULL DEFAULT '',
    purpose          TEXT NOT NULL DEFAULT '',
    current_version  INTEGER NOT NULL,
    approved_version INTEGER,
    requester_id     INTEGER NOT NULL REFERENCES users (id),
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    submitted_at     TEXT
);
CREATE INDEX connections_team ON connections (team, id);
CREATE INDEX connections_team_state ON connections (team, state, id);
CREATE INDEX connections_state ON connections (state, id);
CREATE INDEX connections_cluster ON connections (cluster_name, id);
CREATE INDEX connections_queue ON connections (state, submitted_at, id);

-- Contract versions are immutable: body is the canonical JSON, hash its
-- SHA-256. Approvals bind to (version, hash).
CREATE TABLE contract_versions (
    connection_id INTEGER NOT NULL REFERENCES connections (id),
    version       INTEGER NOT NULL,
    body          TEXT NOT NULL,
    hash          TEXT NOT NULL,
    namespaces    TEXT NOT NULL DEFAULT '', -- space-separated, for uniqueness checks
    author_id     INTEGER NOT NULL REFERENCES users (id),
    created_at    TEXT NOT NULL,
    PRIMARY KEY (connection_id, version)
);
-- +dialect sqlite
CREATE TRIGGER contract_versions_immutable BEFORE UPDATE ON contract_versions
BEGIN SELECT RAISE(ABORT, 'contract versions are immutable'); END;
CREATE TRIGGER contract_versions_no_delete BEFORE DELETE ON contract_versions
BEGIN SELECT RAISE(ABORT, 'contract versions are immutable'); END;
-- +dialect postgres
-- PostgreSQL triggers call a function: portal_refuse raises the message the
-- trigger passes, as SQLite's RAISE(ABORT, ...) does.
-- +goose StatementBegin
CREATE FUNCTION portal_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER contract_versions_immutable BEFORE UPDATE ON contract_versions FOR EACH ROW
EXECUTE FUNCTION portal_refuse('contract versions are immutable');
CREATE TRIGGER contract_versions_no_delete BEFORE DELETE ON contract_versions FOR EACH ROW
EXECUTE FUNCTION portal_refuse('contract versions are immutable');
-- +dialect end

-- The guaranteed capacity of each version, one row per instance type, so
-- the approval's capacity check is an indexed SUM instead of decoding every
-- live contract inside the write lock.
CREATE TABLE version_capacity (
    connection_id INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    instance_type TEXT NOT NULL,
    count         INTEGER NOT NULL,
    PRIMARY KEY (connection_id, version, instance_type),
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version)
);

-- Admin decisions on a version: approvals (two distinct admins for
-- restricted data), rejections and change requests, each with a reason.
CREATE TABLE decisions (
    id            INTEGER PRIMARY KEY,
    connection_id INTEGER NOT NULL REFERENCES connections (id),
    version       INTEGER NOT NULL,
    hash          TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('approve', 'reject', 'request_changes')),
    actor_id      INTEGER NOT NULL REFERENCES users (id),
    reason        TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version)
);
CREATE UNIQUE INDEX decisions_one_approval ON decisions (connection_id, version, actor_id) WHERE kind = 'approve';
CREATE INDEX decisions_connection ON decisions (connection_id, id);

-- Append-only, hash-chained audit trail: hash = SHA-256(prev_hash | fields).
CREATE TABLE audit_events (
    id          INTEGER PRIMARY KEY,
    at          TEXT NOT NULL,
    actor_id    INTEGER,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    object_type TEXT NOT NULL,
    object_id   INTEGER NOT NULL DEFAULT 0,
    team        TEXT NOT NULL DEFAULT '',
    version     INTEGER NOT NULL DEFAULT 0,
    reason      TEXT NOT NULL DEFAULT '',
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL
);
CREATE INDEX audit_object ON audit_events (object_type, object_id, id);
CREATE INDEX audit_team ON audit_events (team, id);
-- +dialect sqlite
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
-- +dialect postgres
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit_events FOR EACH ROW
EXECUTE FUNCTION portal_refuse('the audit trail is append-only');
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit_events FOR EACH ROW
EXECUTE FUNCTION portal_refuse('the audit trail is append-only');
-- SQLite has no TRUNCATE; PostgreSQL's skips row triggers.
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit_events
EXECUTE FUNCTION portal_refuse('the audit trail is append-only');
-- +dialect end

-- The cluster's schedulable capacity per instance type, edited by admins;
-- approvals may not commit more than this.
CREATE TABLE cluster_inventory (
    cluster_name  TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    count         INTEGER NOT NULL CHECK (count >= 0),
    updated_by    INTEGER REFERENCES users (id),
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (cluster_name, instance_type)
);

-- +goose Down
DROP TABLE cluster_inventory;
DROP TABLE audit_events;
DROP TABLE decisions;
DROP TABLE version_capacity;
DROP TABLE contract_versions;
DROP TABLE connections;
-- +dialect postgres
DROP FUNCTION portal_refuse();
-- +dialect end
