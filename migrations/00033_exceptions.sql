-- +goose Up
-- Exceptions with an expiry (issue 35; workflow/exception.go): a time-bound
-- grant to one live connection of a priority class its contract does not
-- allow, by the contract's exception owner or an admin who is not of the
-- team, with a reason, for up to the cluster's exception_max_days.
--   state: 'active' from the grant: the class is in the team's admission
--     parameters (provision.WithExceptions) and a reapply job applies it;
--     'reverting': the intent to revert is recorded (the end passed, or
--     someone revoked it early): the class is no longer in the parameters
--     and job_id is the reapply job that applies that; 'reverted': that job
--     succeeded (or the connection is no longer live), recorded once.
--   job_id: the reapply job that applies the current state (NULL while one
--     waits to be queued: the worker's sweep queues it once none is open).
--   applied_at: when the grant's job succeeded ('' until then).
--   revoked_by / revoked_by_id / revoke_reason: an early revocation ('' / 0
--     for an expiry); ended_at: when the revert was decided; reverted_at:
--     when it was recorded done.
CREATE TABLE exceptions (
    id             INTEGER PRIMARY KEY,
    connection_id  INTEGER NOT NULL REFERENCES connections (id),
    team           TEXT NOT NULL,
    priority_class TEXT NOT NULL CHECK (length(priority_class) > 0),
    reason         TEXT NOT NULL CHECK (length(trim(reason)) > 0),
    granted_by     TEXT NOT NULL,
    granted_by_id  INTEGER NOT NULL,
    starts_at      TEXT NOT NULL,
    ends_at        TEXT NOT NULL,
    state          TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'reverting', 'reverted')),
    job_id         INTEGER REFERENCES jobs (id),
    applied_at     TEXT NOT NULL DEFAULT '',
    revoked_by     TEXT NOT NULL DEFAULT '',
    revoked_by_id  INTEGER NOT NULL DEFAULT 0,
    revoke_reason  TEXT NOT NULL DEFAULT '',
    ended_at       TEXT NOT NULL DEFAULT '',
    reverted_at    TEXT NOT NULL DEFAULT '',
    CHECK (ends_at > starts_at),
    CHECK ((state = 'active') = (ended_at = '')),
    CHECK ((state = 'reverted') = (reverted_at != ''))
);
-- The worker's sweep and the plans read the unfinished exceptions; at most
-- one unfinished exception per connection and class.
CREATE INDEX exceptions_open ON exceptions (state, ends_at) WHERE state != 'reverted';
CREATE UNIQUE INDEX exceptions_one_open ON exceptions (connection_id, priority_class) WHERE state != 'reverted';
CREATE INDEX exceptions_connection ON exceptions (connection_id, id);
-- +dialect postgres
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON exceptions
FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end

-- +goose Down
DROP TABLE exceptions;
