-- +goose Up
-- CPU split like accelerators (issue 31 item 9): HyperPod's usage report
-- gives vCPU hours as total, allocated (within the team's quota) and
-- borrowed (awslabs/sagemaker-hyperpod-usage-report, csv_generator.py).
-- borrowed_cpu_milli_s is the part of cpu_milli_s a team held above its CPU
-- guarantee in force (the instances guaranteed times the vCPUs of one:
-- the ClusterQueue's cpu nominal quota), computed by the collector
-- (usage.IntegrateSplit). Hours recorded before this migration keep 0: all
-- their CPU counts as within the guarantee, and the daily summary says so.
-- usage_days does not carry it: the daily summary sums usage_hours.
ALTER TABLE usage_hours ADD COLUMN borrowed_cpu_milli_s INTEGER NOT NULL DEFAULT 0 CHECK (borrowed_cpu_milli_s >= 0);

-- +goose Down
ALTER TABLE usage_hours DROP COLUMN borrowed_cpu_milli_s;
