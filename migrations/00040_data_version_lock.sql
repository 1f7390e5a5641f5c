-- +goose Up
-- PostgreSQL's data version tells a write in progress by an advisory lock
-- instead of pg_locks (issue 33). portal_data_version_state() (00036) looked
-- for a write lock of another session in pg_locks, a view that copies the
-- server's whole lock table on every read: 0.151 ms a read alone against
-- 0.062 ms for SELECT 1 (pgbench, one client, this test bed), and 17,700
-- reads a second at four clients. Every page view waits for one such read
-- (store.versionFlights), and in make bench every PostgreSQL page, 2 KiB or
-- 83 KiB, stopped at 18,000-22,000 views a second (commit 4d2df71).
-- Now:
--   - the statement trigger (00024, and the sessions' row triggers of
--     00032) takes a transaction-level SHARED advisory lock on the key
--     below BEFORE it bumps the sequence; the transaction holds it to its
--     end, and a session that holds it already takes it again at no wait;
--   - the reader reads the sequence, THEN tries the EXCLUSIVE lock on the
--     same key and releases it at once: taken, no transaction that counted
--     a write in the version read is still open (each took the shared lock
--     before its bump and keeps it until it has committed or rolled back,
--     and a commit is visible to new snapshots before its locks are
--     released); refused, busy, and store.pgDataVersion treats it as
--     00036 did (the version of the last clean read, or a pause and a read
--     again).
-- 0.074 ms a read alone, 72,000 a second at four clients (pgbench, the same
-- database). "Advisory locks ... are not enforced by the system", are
-- scoped to the current database, and "a transaction-level lock request
-- ... is automatically released at the end of the transaction"
-- (postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS);
-- pg_try_advisory_lock "obtains an exclusive session-level advisory lock if
-- available ... returns true, or false if the lock cannot be acquired
-- immediately" (docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS).
-- What changes: a transaction that holds a write lock but has not finished
-- a write statement (a long DELETE still running, a session's idle-expiry
-- refresh, whose trigger does not fire) no longer counts as busy: nothing
-- it did is in the version, so the committed data are the version's. Two
-- readers at the same instant (two replicas) see each other's exclusive
-- try as busy, and the reader's pause resolves it. The key is 8101820098839078006,
-- 0x706f7274616c6476, "portaldv" in ASCII, beside the portal's other
-- advisory keys (listed at leader.AdvisoryLockKey).
-- portal_data_version() (00024) stays as it was, for replicas of a previous
-- release during a rolling update: writers still take their table locks.
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION portal_data_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(8101820098839078006);
    PERFORM nextval('portal_data_version');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION portal_data_version_state(OUT version text, OUT busy boolean) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v bigint;
BEGIN
    SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO v FROM portal_data_version;
    version := v::text;
    busy := NOT pg_try_advisory_lock(8101820098839078006);
    IF NOT busy THEN
        PERFORM pg_advisory_unlock(8101820098839078006);
    END IF;
END
$$;
-- +goose StatementEnd
-- +dialect end

-- +goose Down
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION portal_data_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('portal_data_version');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION portal_data_version_state(OUT version text, OUT busy boolean) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v bigint;
BEGIN
    SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO v FROM portal_data_version;
    version := v::text;
    busy := EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'relation' AND granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND pid IS DISTINCT FROM pg_backend_pid()
          AND mode IN ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
    );
END
$$;
-- +goose StatementEnd
-- +dialect end
