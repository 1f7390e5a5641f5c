-- +goose Up
-- The review scheduler (issue 13), internal/review.
--   singletons: one running instance of a background loop at a time (the
--     review scheduler): who holds it and its last heartbeat; another
--     instance takes it over only once the heartbeat is older than its lease.
--   review_events: every event the scheduler acted on, by a key naming the
--     event and the connection ("signal:12:conn:3"), written in the
--     transaction that opened the review (or added the trigger to the open
--     one): a tick that died half-way, or a second look at the same event,
--     acts on it once.
--   review_cluster_seen: the last capacity and orchestrator version the
--     scheduler saw of each cluster (a fingerprint) and how many times it
--     changed; a change opens reviews of the cluster's live connections,
--     the first observation does not.
--   review_owner_seen: whether each owner of a live connection was last
--     seen in the team's owners group ('yes', 'no', 'unknown'): leaving it
--     (a 'no' after anything else) is an event.
CREATE TABLE singletons (
    name         TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL
);
CREATE TABLE review_events (
    key           TEXT PRIMARY KEY,
    connection_id INTEGER NOT NULL REFERENCES connections (id),
    trigger       TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE TABLE review_cluster_seen (
    cluster     TEXT NOT NULL,
    what        TEXT NOT NULL CHECK (what IN ('capacity', 'orchestrator')),
    fingerprint TEXT NOT NULL,
    generation  INTEGER NOT NULL DEFAULT 0,
    seen_at     TEXT NOT NULL,
    PRIMARY KEY (cluster, what)
);
CREATE TABLE review_owner_seen (
    connection_id INTEGER NOT NULL REFERENCES connections (id),
    email         TEXT NOT NULL,
    in_group      TEXT NOT NULL CHECK (in_group IN ('yes', 'no', 'unknown')),
    seen_at       TEXT NOT NULL,
    PRIMARY KEY (connection_id, email)
);

-- +goose Down
DROP TABLE review_owner_seen;
DROP TABLE review_cluster_seen;
DROP TABLE review_events;
DROP TABLE singletons;
