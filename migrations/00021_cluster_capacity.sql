-- +goose Up
-- Per-cluster capacity totals and per-team guarantees (issue 15): the guaranteed capacity every
-- live connection holds on a cluster, per instance type, kept by the store's
-- apply in the transaction that changes a connection (internal/store,
-- capacityDelta), so that the detail page and an approval read one row per
-- instance type instead of summing every live connection of the cluster.
-- A connection holds, per type, the larger of its approved version's count
-- and, while an approved change is applied (amendment approved or failed),
-- its current version's. Rows whose total is zero are removed.
CREATE TABLE cluster_capacity (
    cluster_name  TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    count         INTEGER NOT NULL,
    PRIMARY KEY (cluster_name, instance_type)
);
INSERT INTO cluster_capacity (cluster_name, instance_type, count)
SELECT cluster_name, t, SUM(n) FROM (
  SELECT c.cluster_name AS cluster_name, vc.instance_type AS t, MAX(vc.count) AS n FROM connections c
  JOIN version_capacity vc ON vc.connection_id = c.id
   AND (vc.version = c.approved_version OR (c.amendment IN ('approved', 'failed') AND vc.version = c.current_version))
  WHERE c.state IN ('approved', 'provisioning', 'active', 'under_review', 'revoking')
  GROUP BY c.id, c.cluster_name, vc.instance_type) AS per_connection
GROUP BY cluster_name, t
HAVING SUM(n) <> 0;

-- Per-team guarantees in force, kept the same way: the sum, per instance
-- type, of the approved versions of a team's live connections (an open
-- change is not in force until it is applied). The usage page, the cost
-- block and the plan's quota suggestions read them instead of summing every
-- live connection.
CREATE TABLE team_capacity (
    team          TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    count         INTEGER NOT NULL,
    PRIMARY KEY (team, instance_type)
);
INSERT INTO team_capacity (team, instance_type, count)
SELECT c.team, vc.instance_type, SUM(vc.count) FROM connections c
JOIN version_capacity vc ON vc.connection_id = c.id AND vc.version = c.approved_version
WHERE c.state IN ('approved', 'provisioning', 'active', 'under_review', 'revoking')
GROUP BY c.team, vc.instance_type
HAVING SUM(vc.count) <> 0;

-- A team's usage rows of a period (the team usage page, the detail page's
-- quota suggestions) through an index on the team and hour, instead of
-- every team's rows of the period through the hour index (in the order
-- UsageHours returns them, so no sort either).
CREATE INDEX usage_hours_by_team_hour ON usage_hours (team, hour, namespace, instance_type);

-- +goose Down
DROP INDEX usage_hours_by_team_hour;
DROP TABLE team_capacity;
DROP TABLE cluster_capacity;
