-- +goose Up
-- Usage from more than one reader (issue 36): the EKS collector and the
-- Slurm accounting reader each recompute and replace their own cluster's
-- hours. cluster is the collector's cluster (usage_collector.cluster) that
-- wrote the row; '' for rows written without one (demo and seeded rows).
-- A collector's recompute replaces the rows of its own cluster (and those
-- of none), never another's. Rows recorded before this migration came from
-- the one collector of the portal (the Slurm reader did not exist), so
-- they take its cluster.
ALTER TABLE usage_hours ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
UPDATE usage_hours SET cluster = COALESCE((SELECT MIN(cluster) FROM usage_collector), '') WHERE source = 'cluster';

-- +goose Down
ALTER TABLE usage_hours DROP COLUMN cluster;
