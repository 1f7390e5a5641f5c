-- +goose Up
-- The month's chargeback reads its whole days from usage_days (00025,
-- store.summedHoursSQL) by a range of day. Through the primary key's index
-- alone that is one table lookup per row read: at 1,000 teams a month is
-- 30,000 lookups, and where the rows were written team by team (a backfill,
-- make bench's seed) each lands on another page. Make bench's usage row
-- (month's chargeback at 1,000 teams < 100 ms) measured 221-507 ms on
-- SQLite, nearly all of it in these lookups. This index carries every
-- column the read takes, so the read is one range of one index: a covering
-- index on SQLite, an index-only scan on PostgreSQL where the visibility
-- map allows it. The same index on both engines (the sums as key columns
-- rather than PostgreSQL's INCLUDE, which SQLite lacks), so that
-- TestPostgresSchemaMatchesSQLite compares like with like.
CREATE INDEX usage_days_span ON usage_days (day, team, namespace, instance_type, source,
    guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s);

-- +goose Down
DROP INDEX usage_days_span;
