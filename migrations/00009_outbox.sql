-- +goose Up
-- The notification outbox: an effect's notifications, written in the same
-- transaction as the state change that caused them (internal/store's apply);
-- the reviews issue delivers them.
CREATE TABLE outbox (
    id            INTEGER PRIMARY KEY,
    connection_id INTEGER REFERENCES connections (id),
    team          TEXT NOT NULL DEFAULT '',
    kind          TEXT NOT NULL,
    recipients    TEXT NOT NULL DEFAULT '',
    subject       TEXT NOT NULL DEFAULT '',
    body          TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    delivered_at  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX outbox_pending ON outbox (id) WHERE delivered_at = '';

-- +goose Down
DROP TABLE outbox;
