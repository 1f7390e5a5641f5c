-- +goose Up
-- The installation's signing key (issue 31 item 11; internal/signing): an
-- Ed25519 key pair made once, by whichever replica starts first, and shared
-- by every replica. The public half is in the open (it is published at
-- /.well-known/hyperpod-portal/evidence-key); the private key's seed is
-- sealed (AES-256-GCM) under a key derived from the session key, so the
-- database alone cannot sign. slot is 'active' for the key in use and NULL
-- for a retired one: the UNIQUE constraint admits one active key, and the
-- store inserts it only if none is there, inside a write transaction.
CREATE TABLE signing_keys (
    key_id      TEXT PRIMARY KEY,
    slot        TEXT UNIQUE CHECK (slot = 'active'),
    algorithm   TEXT NOT NULL CHECK (algorithm = 'ed25519'),
    public_key  TEXT NOT NULL,
    sealed_private_key TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    retired_at  TEXT NOT NULL DEFAULT ''
);

-- The audit chain's head as published once a UTC day to the notification
-- channels (mail and webhook, through the outbox), signed with the key
-- above: day is the primary key, so a second replica's publication of the
-- same day inserts nothing and sends nothing.
CREATE TABLE audit_head_publications (
    day          TEXT PRIMARY KEY,
    head_id      INTEGER NOT NULL,
    head_count   INTEGER NOT NULL,
    head_hash    TEXT NOT NULL,
    head_at      TEXT NOT NULL,
    key_id       TEXT NOT NULL REFERENCES signing_keys (key_id),
    signature    TEXT NOT NULL,
    published_at TEXT NOT NULL
);
-- +dialect postgres
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON signing_keys
FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON audit_head_publications
FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end

-- +goose Down
DROP TABLE audit_head_publications;
DROP TABLE signing_keys;
