-- +goose Up
-- Delivery of the notification outbox (00009). The delivery worker
-- (internal/notify) dispatches each outbox row once: it records one delivery
-- row per configured channel (inapp always; email and webhook only when
-- configured) and stamps the outbox row's dispatched_at, in one transaction.
-- Each delivery is then tried on its own, with a lease (lease_until) so a
-- second process or a restarted one never sends it while another holds it,
-- and with exponential backoff (next_attempt_at) after a failure. The
-- outbox row's delivered_at is set when every one of its deliveries is done.
ALTER TABLE outbox ADD COLUMN dispatched_at TEXT NOT NULL DEFAULT '';
-- Rows written before delivery existed were never promised to anyone: they
-- are not sent now (an upgrade would otherwise mail the whole history).
UPDATE outbox SET dispatched_at = created_at;
CREATE INDEX outbox_undispatched ON outbox (id) WHERE dispatched_at = '';

CREATE TABLE deliveries (
    id              INTEGER PRIMARY KEY,
    outbox_id       INTEGER NOT NULL REFERENCES outbox (id),
    channel         TEXT NOT NULL CHECK (channel IN ('inapp', 'email', 'webhook')),
    -- who it went to, resolved when it was (last) tried: user emails
    recipients      TEXT NOT NULL DEFAULT '',
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    lease_until     TEXT NOT NULL DEFAULT '',
    last_error      TEXT NOT NULL DEFAULT '',
    delivered_at    TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    UNIQUE (outbox_id, channel)
);
CREATE INDEX deliveries_due ON deliveries (channel, next_attempt_at) WHERE delivered_at = '';

-- The in-app notifications: one row per recipient of an outbox row.
CREATE TABLE notifications (
    id            INTEGER PRIMARY KEY,
    user_id       INTEGER NOT NULL REFERENCES users (id),
    outbox_id     INTEGER NOT NULL REFERENCES outbox (id),
    connection_id INTEGER,
    kind          TEXT NOT NULL,
    subject       TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    read_at       TEXT NOT NULL DEFAULT '',
    UNIQUE (outbox_id, user_id)
);
CREATE INDEX notifications_by_user ON notifications (user_id, id);
-- The header's unread count on every page: one partial-index range.
CREATE INDEX notifications_unread ON notifications (user_id) WHERE read_at = '';

-- +goose Down
DROP TABLE notifications;
DROP TABLE deliveries;
DROP INDEX outbox_undispatched;
ALTER TABLE outbox DROP COLUMN dispatched_at;
