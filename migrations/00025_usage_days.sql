-- +goose Up
-- Each usage line's UTC day (issue 15): usage_hours summed per team,
-- namespace, instance type, source and day, kept by triggers in the
-- statement that changes an hourly row, whoever writes it (the collector,
-- the demo seed, pruning, a test). The month-to-date chargeback
-- (store.DB.CostInputSummed) reads the whole days of a span from here and
-- only the hours of its partial first and last days from usage_hours: at
-- the end of a month at 1,000 teams that is about 30,000 rows instead of
-- 720,000 (on PostgreSQL, 55 ms instead of 560 ms for every cached
-- chargeback a new hour or a collector flush makes stale).
-- day is the day's midnight in the store's time layout (store.fmtTime), so
-- it compares with the span's bounds as text; hours counts the hourly rows
-- summed, and a day whose last hour is deleted is deleted.
CREATE TABLE usage_days (
    team            TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    instance_type   TEXT NOT NULL,
    source          TEXT NOT NULL,
    day             TEXT NOT NULL,
    hours           INTEGER NOT NULL,
    guaranteed_accel_s INTEGER NOT NULL,
    borrowed_accel_s   INTEGER NOT NULL,
    cpu_milli_s     INTEGER NOT NULL,
    memory_mib_s    INTEGER NOT NULL,
    PRIMARY KEY (day, team, namespace, instance_type, source)
);
INSERT INTO usage_days (team, namespace, instance_type, source, day, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s)
SELECT team, namespace, instance_type, source, substr(hour, 1, 10) || 'T00:00:00.000000000Z', COUNT(*),
       SUM(guaranteed_accel_s), SUM(borrowed_accel_s), SUM(cpu_milli_s), SUM(memory_mib_s)
FROM usage_hours GROUP BY team, namespace, instance_type, source, substr(hour, 1, 10);
-- +dialect sqlite
-- Row triggers. An UPDATE (an upsert's replacement included) takes the old
-- row out of its day and adds the new one.
-- +goose StatementBegin
CREATE TRIGGER usage_days_ins AFTER INSERT ON usage_hours
BEGIN
    INSERT INTO usage_days (team, namespace, instance_type, source, day, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s)
    VALUES (NEW.team, NEW.namespace, NEW.instance_type, NEW.source, substr(NEW.hour, 1, 10) || 'T00:00:00.000000000Z', 1,
            NEW.guaranteed_accel_s, NEW.borrowed_accel_s, NEW.cpu_milli_s, NEW.memory_mib_s)
    ON CONFLICT (day, team, namespace, instance_type, source) DO UPDATE SET hours = hours + 1,
        guaranteed_accel_s = guaranteed_accel_s + excluded.guaranteed_accel_s, borrowed_accel_s = borrowed_accel_s + excluded.borrowed_accel_s,
        cpu_milli_s = cpu_milli_s + excluded.cpu_milli_s, memory_mib_s = memory_mib_s + excluded.memory_mib_s;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER usage_days_del AFTER DELETE ON usage_hours
BEGIN
    UPDATE usage_days SET hours = hours - 1, guaranteed_accel_s = guaranteed_accel_s - OLD.guaranteed_accel_s,
        borrowed_accel_s = borrowed_accel_s - OLD.borrowed_accel_s, cpu_milli_s = cpu_milli_s - OLD.cpu_milli_s,
        memory_mib_s = memory_mib_s - OLD.memory_mib_s
    WHERE day = substr(OLD.hour, 1, 10) || 'T00:00:00.000000000Z' AND team = OLD.team AND namespace = OLD.namespace
      AND instance_type = OLD.instance_type AND source = OLD.source;
    DELETE FROM usage_days WHERE day = substr(OLD.hour, 1, 10) || 'T00:00:00.000000000Z' AND team = OLD.team
      AND namespace = OLD.namespace AND instance_type = OLD.instance_type AND source = OLD.source AND hours = 0;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER usage_days_upd AFTER UPDATE ON usage_hours
BEGIN
    UPDATE usage_days SET hours = hours - 1, guaranteed_accel_s = guaranteed_accel_s - OLD.guaranteed_accel_s,
        borrowed_accel_s = borrowed_accel_s - OLD.borrowed_accel_s, cpu_milli_s = cpu_milli_s - OLD.cpu_milli_s,
        memory_mib_s = memory_mib_s - OLD.memory_mib_s
    WHERE day = substr(OLD.hour, 1, 10) || 'T00:00:00.000000000Z' AND team = OLD.team AND namespace = OLD.namespace
      AND instance_type = OLD.instance_type AND source = OLD.source;
    DELETE FROM usage_days WHERE day = substr(OLD.hour, 1, 10) || 'T00:00:00.000000000Z' AND team = OLD.team
      AND namespace = OLD.namespace AND instance_type = OLD.instance_type AND source = OLD.source AND hours = 0;
    INSERT INTO usage_days (team, namespace, instance_type, source, day, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s)
    VALUES (NEW.team, NEW.namespace, NEW.instance_type, NEW.source, substr(NEW.hour, 1, 10) || 'T00:00:00.000000000Z', 1,
            NEW.guaranteed_accel_s, NEW.borrowed_accel_s, NEW.cpu_milli_s, NEW.memory_mib_s)
    ON CONFLICT (day, team, namespace, instance_type, source) DO UPDATE SET hours = hours + 1,
        guaranteed_accel_s = guaranteed_accel_s + excluded.guaranteed_accel_s, borrowed_accel_s = borrowed_accel_s + excluded.borrowed_accel_s,
        cpu_milli_s = cpu_milli_s + excluded.cpu_milli_s, memory_mib_s = memory_mib_s + excluded.memory_mib_s;
END;
-- +goose StatementEnd
-- +dialect postgres
-- Row triggers as on SQLite, in one function; TRUNCATE empties the days
-- (a statement trigger: TRUNCATE fires no row trigger). The data version
-- trigger every table carries (migration 00024) is added here too.
-- +goose StatementBegin
CREATE FUNCTION portal_usage_days() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM usage_days;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE usage_days SET hours = hours - 1, guaranteed_accel_s = guaranteed_accel_s - OLD.guaranteed_accel_s,
            borrowed_accel_s = borrowed_accel_s - OLD.borrowed_accel_s, cpu_milli_s = cpu_milli_s - OLD.cpu_milli_s,
            memory_mib_s = memory_mib_s - OLD.memory_mib_s
        WHERE day = substr(OLD.hour, 1, 10) || 'T00:00:00.000000000Z' AND team = OLD.team AND namespace = OLD.namespace
          AND instance_type = OLD.instance_type AND source = OLD.source;
        DELETE FROM usage_days WHERE day = substr(OLD.hour, 1, 10) || 'T00:00:00.000000000Z' AND team = OLD.team
          AND namespace = OLD.namespace AND instance_type = OLD.instance_type AND source = OLD.source AND hours = 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO usage_days AS d (team, namespace, instance_type, source, day, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s)
        VALUES (NEW.team, NEW.namespace, NEW.instance_type, NEW.source, substr(NEW.hour, 1, 10) || 'T00:00:00.000000000Z', 1,
                NEW.guaranteed_accel_s, NEW.borrowed_accel_s, NEW.cpu_milli_s, NEW.memory_mib_s)
        ON CONFLICT (day, team, namespace, instance_type, source) DO UPDATE SET hours = d.hours + 1,
            guaranteed_accel_s = d.guaranteed_accel_s + excluded.guaranteed_accel_s, borrowed_accel_s = d.borrowed_accel_s + excluded.borrowed_accel_s,
            cpu_milli_s = d.cpu_milli_s + excluded.cpu_milli_s, memory_mib_s = d.memory_mib_s + excluded.memory_mib_s;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER usage_days_rows AFTER INSERT OR UPDATE OR DELETE ON usage_hours
FOR EACH ROW EXECUTE FUNCTION portal_usage_days();
CREATE TRIGGER usage_days_truncate AFTER TRUNCATE ON usage_hours
FOR EACH STATEMENT EXECUTE FUNCTION portal_usage_days();
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON usage_days
FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end

-- +goose Down
-- +dialect sqlite
DROP TRIGGER usage_days_ins;
DROP TRIGGER usage_days_del;
DROP TRIGGER usage_days_upd;
-- +dialect postgres
DROP TRIGGER usage_days_rows ON usage_hours;
DROP TRIGGER usage_days_truncate ON usage_hours;
DROP FUNCTION portal_usage_days();
-- +dialect end
DROP TABLE usage_days;
