-- +goose Up
-- Kueue's account of borrowing beside the portal's (issue 34): for each
-- ClusterQueue, flavor and accelerator resource, what Kueue's ClusterQueue
-- status reported borrowing (status.flavorsUsage[].resources[].borrowed:
-- quota in use by the queue's admitted workloads above its nominal quota)
-- and what the usage collector counted the queue's team holding above its
-- guarantee (the pods on nodes of that instance type), from at on, until
-- the key's next row. The collector adds a row when either figure changes
-- (and once per key when it starts); the signals compare the two
-- (internal/usage, SignalKueueAccount).
CREATE TABLE kueue_borrowing (
    cluster         TEXT NOT NULL,
    cluster_queue   TEXT NOT NULL,
    flavor          TEXT NOT NULL,
    resource        TEXT NOT NULL,
    at              TEXT NOT NULL,
    team            TEXT NOT NULL,
    kueue_borrowed  INTEGER NOT NULL CHECK (kueue_borrowed >= 0),
    portal_borrowed INTEGER NOT NULL CHECK (portal_borrowed >= 0),
    PRIMARY KEY (cluster, cluster_queue, flavor, resource, at)
);
CREATE INDEX kueue_borrowing_by_at ON kueue_borrowing (at);
-- +dialect postgres
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON kueue_borrowing
FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end

-- +goose Down
DROP TABLE kueue_borrowing;
