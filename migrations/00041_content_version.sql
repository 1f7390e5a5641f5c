-- +goose Up
-- A second data version on PostgreSQL that the API's uses do not move
-- (issue 33, make bench's API row). Every API request records its use (a
-- token.use event and the token's last use, store/uses.go), a commit that
-- moved the one data version, so the API's cached list and the token
-- lookups kept under it were read again after every batch of uses. The
-- uses change nothing the list or a token's authorization shows.
--   - A transaction of API uses only sets portal.api_use to 'on' for
--     itself (set_config(..., true), "the new value will only apply
--     during the current transaction",
--     postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADMIN-SET).
--     Its statements then bump portal_use_version under the shared lock of
--     their own key instead of portal_data_version under the data
--     version's (00040). current_setting(name, true) "returns NULL" for a
--     setting never set (docs/current/functions-admin.html), so every
--     other transaction bumps portal_data_version as before.
--   - portal_data_version_state() (every page, the session cache) reads
--     both: its version is both sequences, and busy when either key is
--     held. A use still moves it: the audit trail's page shows token.use.
--   - portal_content_version_state() reads portal_data_version and its key
--     only: the content version (store.DB.ContentVersion), which a
--     transaction of uses never moves nor makes busy.
-- The use key is 8101820098839078005, 0x706f7274616c6475, "portaldu" in
-- ASCII (beside the others, listed at leader.AdvisoryLockKey). A replica of
-- the previous release, during a rolling update, sets nothing: its uses
-- move both versions, which only caches less.
-- +dialect sqlite
SELECT 1;
-- +dialect postgres
CREATE SEQUENCE portal_use_version;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION portal_data_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('portal.api_use', true) = 'on' THEN
        PERFORM pg_advisory_xact_lock_shared(8101820098839078005);
        PERFORM nextval('portal_use_version');
    ELSE
        PERFORM pg_advisory_xact_lock_shared(8101820098839078006);
        PERFORM nextval('portal_data_version');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION portal_data_version_state(OUT version text, OUT busy boolean) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v bigint;
    u bigint;
BEGIN
    SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO v FROM portal_data_version;
    SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO u FROM portal_use_version;
    version := v::text || '.' || u::text;
    busy := NOT pg_try_advisory_lock(8101820098839078006);
    IF NOT busy THEN
        PERFORM pg_advisory_unlock(8101820098839078006);
        busy := NOT pg_try_advisory_lock(8101820098839078005);
        IF NOT busy THEN
            PERFORM pg_advisory_unlock(8101820098839078005);
        END IF;
    END IF;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION portal_content_version_state(OUT version text, OUT busy boolean) LANGUAGE plpgsql VOLATILE AS $$
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
DROP FUNCTION portal_content_version_state();
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
DROP SEQUENCE portal_use_version;
-- +dialect end
