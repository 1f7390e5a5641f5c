-- +goose Up
-- A session's idle-expiry refresh no longer moves PostgreSQL's data version
-- (issue 33). Every page view of a session idle for a few minutes wrote its
-- new expiry (store.SessionStore.SetRefreshGranularity), and that write
-- moved portal_data_version() (00024), so every cached page of every
-- session on every replica was rendered again: in the page benchmark the
-- first views of a page after three idle minutes rendered it four times
-- while 168 views waited (pages/postgres/reviews p99 50.6 ms against 30).
-- Nothing kept under the version shows a session's expiry: the page cache
-- keys a page by the session's token and holds its data (the principal,
-- the CSRF token, a flash message), and SessionStore.FindCtx checks the
-- expiry it read against the clock on every call and reads the row again
-- once past it. So on the sessions table the statement trigger of 00024
-- becomes row triggers: an inserted or deleted session moves the version,
-- an updated one only when its data (or token) changed ("WHEN
-- (OLD.data IS DISTINCT FROM NEW.data)"), and TRUNCATE as before.
-- Row triggers, because "INSERT ... ON CONFLICT DO UPDATE", the store's
-- commit, fires the statement-level INSERT and UPDATE triggers whether or
-- not a row was inserted or updated, and the row-level INSERT trigger only
-- for a row inserted (postgresql.org/docs/current/trigger-definition.html).
-- The refresh still takes its row lock; portal_data_version() is NULL
-- while it is open, and the reader waits it out (store pgVersionWaits).
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
DROP TRIGGER portal_data_changed ON sessions;
CREATE TRIGGER portal_data_changed AFTER INSERT OR DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION portal_data_changed();
CREATE TRIGGER portal_data_changed_update AFTER UPDATE ON sessions
    FOR EACH ROW WHEN (OLD.data IS DISTINCT FROM NEW.data OR OLD.token_hash IS DISTINCT FROM NEW.token_hash)
    EXECUTE FUNCTION portal_data_changed();
CREATE TRIGGER portal_data_changed_truncate AFTER TRUNCATE ON sessions
    FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end

-- +goose Down
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
DROP TRIGGER portal_data_changed_truncate ON sessions;
DROP TRIGGER portal_data_changed_update ON sessions;
DROP TRIGGER portal_data_changed ON sessions;
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sessions
    FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end
