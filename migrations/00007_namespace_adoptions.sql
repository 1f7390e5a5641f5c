-- +goose Up
-- An admin's explicit adoption, when approving a version, of an existing
-- namespace that neither the portal nor HyperPod task governance created
-- (issue 10 item 14). Without a row here the provisioning worker refuses to
-- take such a namespace over; with one, every job of that version (the
-- first, a retry, a re-apply) may, and a revocation locks the namespace
-- instead of deleting it. The audit trail records each adoption
-- (connection.adopt_namespace). The first approval that adopts wins; later
-- approvals of the same version adopt the same namespace.
CREATE TABLE namespace_adoptions (
    connection_id INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    namespace     TEXT NOT NULL,
    actor_id      INTEGER NOT NULL REFERENCES users (id),
    created_at    TEXT NOT NULL,
    PRIMARY KEY (connection_id, version),
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE namespace_adoptions;
