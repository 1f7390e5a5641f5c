-- +goose Up
-- Decision tokens (issue 37; workflow/token.go TokenDecide): api_tokens'
-- scope may also be 'decide'. SQLite cannot alter a CHECK, so the table is
-- rebuilt as 00035 made it, with the wider CHECK; nothing references
-- api_tokens (audit events name a token by object_id).
-- +dialect sqlite
PRAGMA defer_foreign_keys = ON;
CREATE TABLE api_tokens_old AS SELECT * FROM api_tokens;
DROP TABLE api_tokens;
CREATE TABLE api_tokens (
    id             INTEGER PRIMARY KEY,
    user_id        INTEGER NOT NULL REFERENCES users (id),
    name           TEXT NOT NULL CHECK (length(trim(name)) > 0),
    scope          TEXT NOT NULL CHECK (scope IN ('read', 'read-write', 'decide')),
    teams_json     TEXT NOT NULL DEFAULT '[]',
    secret_hash    TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    expires_at     TEXT NOT NULL,
    revoked_at     TEXT NOT NULL DEFAULT '',
    last_used_at   TEXT NOT NULL DEFAULT '',
    last_used_from TEXT NOT NULL DEFAULT '',
    CHECK (expires_at > created_at)
);
INSERT INTO api_tokens (id, user_id, name, scope, teams_json, secret_hash, created_at, expires_at, revoked_at, last_used_at, last_used_from)
    SELECT id, user_id, name, scope, teams_json, secret_hash, created_at, expires_at, revoked_at, last_used_at, last_used_from FROM api_tokens_old;
DROP TABLE api_tokens_old;
CREATE UNIQUE INDEX api_tokens_secret ON api_tokens (secret_hash);
CREATE INDEX api_tokens_user ON api_tokens (user_id, id);
-- +dialect postgres
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_scope_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_scope_check CHECK (scope IN ('read', 'read-write', 'decide'));
-- +dialect end

-- +goose Down
-- +dialect sqlite
PRAGMA defer_foreign_keys = ON;
CREATE TABLE api_tokens_old AS SELECT * FROM api_tokens WHERE scope != 'decide';
DROP TABLE api_tokens;
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
INSERT INTO api_tokens (id, user_id, name, scope, teams_json, secret_hash, created_at, expires_at, revoked_at, last_used_at, last_used_from)
    SELECT id, user_id, name, scope, teams_json, secret_hash, created_at, expires_at, revoked_at, last_used_at, last_used_from FROM api_tokens_old;
DROP TABLE api_tokens_old;
CREATE UNIQUE INDEX api_tokens_secret ON api_tokens (secret_hash);
CREATE INDEX api_tokens_user ON api_tokens (user_id, id);
-- +dialect postgres
DELETE FROM api_tokens WHERE scope = 'decide';
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_scope_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_scope_check CHECK (scope IN ('read', 'read-write'));
-- +dialect end
