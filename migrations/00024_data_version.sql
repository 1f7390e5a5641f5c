-- +goose Up
-- PostgreSQL's data version (store.DB.DataVersion, issue 15) of THIS
-- database. It was pg_current_snapshot(), whose transaction ids are the
-- whole server's: any commit in any other database on the server (another
-- application's, a second portal's) moved it, and every cached page and
-- session of every replica was dropped with it (the page benchmark's two
-- portals share a server: one's burst of notice deliveries, about 700
-- commits, made the other render its dashboard 484 times in 5 s). Now:
--   - every statement that writes a table of this schema bumps a sequence
--     (a statement trigger on every table, TRUNCATE included; a sequence
--     never waits on another writer and is not rolled back), and
--   - portal_data_version() reads the sequence, THEN looks for a
--     transaction of another session still holding a write lock on a table
--     of this database (pg_locks, which every role may read). A writer
--     bumps only after it has written, so while holding its lock; its
--     commit is visible to new snapshots before its locks are released. So
--     when no such lock is held, every bump counted is visible to what is
--     read next; when one is held, the function returns NULL and the caller
--     caches nothing for that request.
-- PostgreSQL's documentation (postgresql.org/docs/current/explicit-locking.html):
-- UPDATE, DELETE and INSERT take ROW EXCLUSIVE on their target table, "in
-- general ... any command that modifies data in a table", TRUNCATE takes
-- ACCESS EXCLUSIVE, and a table lock taken in a transaction is held until
-- the transaction ends; pg_locks (docs/current/view-pg-locks.html) shows the
-- locks "held by open transactions within the database server", with the
-- database of each locked relation.
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
CREATE SEQUENCE portal_data_version;
-- +goose StatementBegin
CREATE FUNCTION portal_data_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('portal_data_version');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema() LOOP
        EXECUTE format('CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I '
            'FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed()', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION portal_data_version() RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v bigint;
BEGIN
    SELECT last_value INTO v FROM portal_data_version;
    IF EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'relation' AND granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND pid IS DISTINCT FROM pg_backend_pid()
          AND mode IN ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
    ) THEN
        RETURN NULL;
    END IF;
    RETURN v::text;
END
$$;
-- +goose StatementEnd
-- +dialect end

-- +goose Down
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid WHERE g.tgname = 'portal_data_changed' LOOP
        EXECUTE format('DROP TRIGGER portal_data_changed ON %I', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION portal_data_version();
DROP FUNCTION portal_data_changed();
DROP SEQUENCE portal_data_version;
-- +dialect end
