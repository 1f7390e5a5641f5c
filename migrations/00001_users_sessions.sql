-- +goose Up
-- Users who have logged in at least once, keyed by their OIDC issuer and
-- subject. groups_json holds the groups seen at the last login, so admins can
-- see why someone has (or lacks) access.
CREATE TABLE users (
    id             INTEGER PRIMARY KEY,
    issuer         TEXT NOT NULL,
    subject        TEXT NOT NULL,
    email          TEXT NOT NULL DEFAULT '',
    name           TEXT NOT NULL DEFAULT '',
    groups_json    TEXT NOT NULL DEFAULT '[]',
    first_login_at TEXT NOT NULL,
    last_login_at  TEXT NOT NULL,
    UNIQUE (issuer, subject)
);
CREATE INDEX users_email ON users (email);

-- Server-side sessions. token_hash is an HMAC of the cookie's token under the
-- session key, so a copy of the database does not yield live session cookies.
-- expiry is unix time in nanoseconds.
CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    data       BLOB NOT NULL,
    expiry     INTEGER NOT NULL
);
CREATE INDEX sessions_expiry ON sessions (expiry);

-- +goose Down
DROP TABLE sessions;
DROP TABLE users;
