-- +goose Up
-- What the cluster itself said about its capacity at the last "Refresh from
-- cluster": per instance type the instance groups' current and target counts
-- (SageMaker DescribeCluster), the nodes and how many of them are healthy
-- and schedulable (Kubernetes), and the capacity taken from them. A manual
-- row in cluster_inventory overrides the observed capacity of its type.
CREATE TABLE cluster_observed (
    cluster_name      TEXT NOT NULL,
    instance_type     TEXT NOT NULL,
    capacity          INTEGER NOT NULL CHECK (capacity >= 0),
    basis             TEXT NOT NULL,
    group_current     INTEGER,
    group_target      INTEGER,
    nodes             INTEGER,
    nodes_schedulable INTEGER,
    observed_by       INTEGER REFERENCES users (id),
    observed_at       TEXT NOT NULL,
    PRIMARY KEY (cluster_name, instance_type)
);

-- +goose Down
DROP TABLE cluster_observed;
