-- +goose Up
-- Personal access tokens for the JSON API (issue 37; workflow/token.go).
-- A token is a person's: it acts as user_id with the groups last confirmed
-- for them (users.groups_json), narrowed to teams_json (a JSON array; []:
-- no limit) and to its scope. The secret is shown once and never stored:
-- secret_hash is the hex SHA-256 of it (a 256-bit random value, so a fast
-- hash is enough, and an index finds it). revoked_at '' while in force;
-- last_used_at / last_used_from ('' before the first use) are written with
-- the use's audit event (token.use), in one transaction.
CREATE TABLE api_tokens (
    id             INTEGER PRIMARY KEY,
    user_id        INTEGER NOT NULL REFERENCES users (id),
    name           TEXT NOT NULL CHECK (length(trim(name)) > 0),
    scope          TEXT NOT NULL CHECK (scope IN ('read', 'read-write')),
    teams_json     TEXT NOT NULL DEFAULT '[]',
    secret_hash    TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    expires_at     TEXT NOT NULL,
    revoked_at     TEXT NOT NULL DEFAULT '',
    last_used_at   TEXT NOT NULL DEFAULT '',
    last_used_from TEXT NOT NULL DEFAULT '',
    CHECK (expires_at > created_at)
);
CREATE UNIQUE INDEX api_tokens_secret ON api_tokens (secret_hash);
CREATE INDEX api_tokens_user ON api_tokens (user_id, id);
-- +dialect postgres
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_tokens
FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end

-- +goose Down
DROP TABLE api_tokens;
