-- +goose Up
-- PostgreSQL's data version while another session holds a write lock
-- (issue 33). portal_data_version() (00024) is NULL whenever one does, and
-- a request then caches nothing: it renders its page from the database.
-- A statement that runs long (a large DELETE or UPDATE of a background
-- loop) held a lock for hundreds of milliseconds, and every page view of
-- that moment rendered uncached: in make bench's PostgreSQL detail page at
-- 1,000,000 audit events, a stall of about 700 ms (p99 496 ms).
-- portal_data_version_state() returns the version and whether a write lock
-- is held, so the reader can tell the harmless case: the version equals
-- one it read earlier while no write lock was held. Every write that
-- version counted had then ended (a writer bumps while it holds its lock,
-- and holds it to its end), and a writer holding a lock now has not
-- finished a statement since (the statement triggers bump at its end):
-- the committed data are still the data of that version, and pages kept
-- under it still show them (store.pgDataVersion). A version past it while
-- a lock is held counts a write that may not be visible yet: no version,
-- as before. The sequence's last_value counts from is_called, so a
-- sequence never used (0) differs from one used once (1).
-- portal_data_version() stays for replicas of the previous release during
-- a rolling update.
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
-- +goose StatementBegin
CREATE FUNCTION portal_data_version_state(OUT version text, OUT busy boolean) LANGUAGE plpgsql VOLATILE AS $$
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

-- +goose Down
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
DROP FUNCTION portal_data_version_state();
-- +dialect end
