package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is every difference between the two engines the store runs on,
// in one place: the queries elsewhere are written once, in SQL both accept,
// with `?` placeholders (rebound to $N for PostgreSQL by the driver wrapper
// below), and ask the dialect only for what cannot be written portably.
type dialect struct {
	postgres bool
}

var (
	dialectSQLite   = dialect{}
	dialectPostgres = dialect{postgres: true}
)

func (d dialect) String() string {
	if d.postgres {
		return "postgres"
	}
	return "sqlite"
}

// isPostgresURL reports whether --db names a PostgreSQL server rather than
// a SQLite file.
func isPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// RedactDSN returns dsn safe to log: a PostgreSQL URL with its password
// replaced by "xxxxx" (and its query, which may carry one too, dropped); a
// file path unchanged.
func RedactDSN(dsn string) string {
	if !isPostgresURL(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.Redacted()
}

// jsonText is the text of the top-level key of a JSON object stored as TEXT
// in col (NULL when absent).
func (d dialect) jsonText(col, key string) string {
	if d.postgres {
		// A dotted key is a path into nested objects: a.b is -> 'a' ->> 'b'.
		parts := strings.Split(key, ".")
		expr := col + "::jsonb"
		for _, p := range parts[:len(parts)-1] {
			expr += " -> '" + p + "'"
		}
		return "(" + expr + " ->> '" + parts[len(parts)-1] + "')"
	}
	return "json_extract(" + col + ", '$." + key + "')"
}

// byteOrder is col in an ORDER BY that sorts text by its bytes, as Go
// compares strings. SQLite's default collation already does
// (https://www.sqlite.org/datatype3.html, "Collating Sequences": "BINARY -
// Compares string data using memcmp(), regardless of text encoding").
// PostgreSQL's default follows the database's locale, which may order
// "a-c" and "ab" otherwise, so the C collation is named
// (https://www.postgresql.org/docs/current/collation.html, "Standard
// Collations": the C and POSIX collations specify "traditional C"
// behavior, in which sorting is done strictly by character code byte
// values).
func (d dialect) byteOrder(col string) string {
	if d.postgres {
		return col + ` COLLATE "C"`
	}
	return col
}

// skipLocked is appended to the SELECT that picks a row to claim (a job, a
// delivery): on PostgreSQL the row is locked and rows another transaction
// holds are skipped, so each row has exactly one claimer. SQLite has one
// writer at a time (BEGIN IMMEDIATE), which already gives that.
func (d dialect) skipLocked() string {
	if d.postgres {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// writerLockKey is the PostgreSQL advisory lock every write transaction
// takes first (the bytes of "portalwr").
const writerLockKey int64 = 0x706f7274616c7772

const (
	// pgWriterLock takes the writers' lock (beginWrite).
	pgWriterLock = `SELECT pg_advisory_xact_lock(?)`
	// pgUsesWriterLock takes it and, in the same round trip, marks the
	// transaction as one of API uses only, which moves
	// portal_use_version and not the content version
	// (migrations/00041_content_version.sql; set_config's true: "only
	// for the current transaction"): one round trip fewer for every
	// batch of uses (six in all; one interleaved run of the API's list
	// on PostgreSQL, 2026-12-07, showed no difference in req/s beyond
	// its noise).
	pgUsesWriterLock = `SELECT pg_advisory_xact_lock(?), set_config('portal.api_use', 'on', true)`
)

// beginWrite starts a write transaction that is serialized with every other
// write transaction on the database, from any process: SQLite's BEGIN
// IMMEDIATE (see Open) takes the database's write lock; on PostgreSQL the
// transaction takes a transaction-level advisory lock first, released at
// commit or rollback. Rules checked inside a write transaction (a
// connection's state, the audit chain's head) therefore see every earlier
// writer's commit and no concurrent one, on both engines.
//
// lock is the PostgreSQL statement that takes that lock, with writerLockKey
// its one argument: pgWriterLock, or pgUsesWriterLock for a transaction of
// API uses only.
func (d dialect) beginWrite(ctx context.Context, db *sql.DB, lock string) (*sql.Tx, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if d.postgres {
		if _, err := tx.ExecContext(ctx, lock, writerLockKey); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("writer lock: %w", err)
		}
	}
	return tx, nil
}

func (d dialect) goose() goose.Dialect {
	if d.postgres {
		return goose.DialectPostgres
	}
	return goose.DialectSQLite3
}

// migrationLock serializes `portal migrate` run from several replicas (or
// processes) at once: goose decides which migrations are pending before it
// applies them, so two unlocked runs would both apply the first. On
// PostgreSQL goose holds a session advisory lock while it migrates; on
// SQLite an exclusive lock on the file path+".migrate-lock" (flock).
func (d dialect) migrationLock(path string) ([]goose.ProviderOption, error) {
	if !d.postgres {
		if path == ":memory:" {
			return nil, nil
		}
		return []goose.ProviderOption{goose.WithSessionLocker(&fileLocker{path: path + ".migrate-lock"})}, nil
	}
	l, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	return []goose.ProviderOption{goose.WithSessionLocker(l)}, nil
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY
// constraint failure, from either driver's error code.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505" // unique_violation
	}
	return false
}

// openPostgres opens a pool on the PostgreSQL server and database dsn
// names, through pgx's database/sql driver wrapped by pgConnector.
func openPostgres(ctx context.Context, dsn string) (*sql.DB, error) {
	return openPostgresWith(ctx, dsn, nil)
}

// openPostgresWith is openPostgres with these run-time parameters set on
// every session (OpenReadOnly: default_transaction_read_only).
func openPostgresWith(ctx context.Context, dsn string, params map[string]string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's message quotes the URL with the password masked; ours
		// names only the redacted URL.
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			return nil, fmt.Errorf("parse database URL: %v", pe.Unwrap())
		}
		return nil, errors.New("parse database URL: invalid")
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	db := sql.OpenDB(pgConnector{stdlib.GetConnector(*cfg)})
	db.SetMaxOpenConns(16)
	// Keep them all: database/sql keeps 2 idle by default, so under load
	// every request beyond the second opened a new connection.
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// pgConnector wraps pgx's connector so that the store's queries, written
// once with SQLite's `?` placeholders, run on PostgreSQL: each query's `?`
// becomes $1, $2, ... (rebind), and a Go bool bound to a BIGINT parameter
// is sent as 0 or 1 (boolAsInt8), as the schema stores flags in integer
// columns on both engines.
type pgConnector struct{ driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc := conn.(*stdlib.Conn)
	sc.Conn().TypeMap().RegisterType(&pgtype.Type{Name: "int8", OID: pgtype.Int8OID, Codec: boolAsInt8{}})
	return pgConn{sc}, nil
}

// boolAsInt8 is pgx's int8 codec that also encodes a bool, as 0 or 1.
type boolAsInt8 struct{ pgtype.Int8Codec }

func (c boolAsInt8) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(bool); ok {
		if next := c.Int8Codec.PlanEncode(m, oid, format, int64(0)); next != nil {
			return boolPlan{next}
		}
	}
	return c.Int8Codec.PlanEncode(m, oid, format, value)
}

type boolPlan struct{ next pgtype.EncodePlan }

func (p boolPlan) Encode(value any, buf []byte) ([]byte, error) {
	var n int64
	if value.(bool) {
		n = 1
	}
	return p.next.Encode(n, buf)
}

// pgConn is pgx's connection with the store's queries rebound, and
// copyInQuery run as the copy its copyIn describes (upsertRows).
type pgConn struct{ *stdlib.Conn }

func (c pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(rebound(query))
}

func (c pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebound(query))
}

func (c pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if query == copyInQuery && len(args) == 1 {
		if ci, ok := args[0].Value.(*copyIn); ok {
			n, err := ci.run(ctx, c.Conn.Conn())
			return driver.RowsAffected(n), err
		}
	}
	return c.Conn.ExecContext(ctx, rebound(query), args)
}

func (c pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebound(query), args)
}

// rebindCache holds rebind's result per query text, so that a query is
// rewritten once per process rather than on every call (issue 15). The
// store's queries are a fixed set of texts (values are always bound, never
// formatted in), so the cache stays small; it still stops growing at
// rebindCacheMax entries, past which queries are rebound on every call.
var (
	rebindCache     sync.Map // query -> rebound query
	rebindCacheSize atomic.Int64
)

const rebindCacheMax = 4096

// rebound is rebind(query), from rebindCache when it is there.
func rebound(query string) string {
	if v, ok := rebindCache.Load(query); ok {
		return v.(string)
	}
	r := rebind(query)
	if rebindCacheSize.Load() < rebindCacheMax {
		if _, loaded := rebindCache.LoadOrStore(query, r); !loaded {
			rebindCacheSize.Add(1)
		}
	}
	return r
}

// rebind replaces each `?` placeholder of query with $1, $2, ... in order,
// leaving `?` inside string literals, quoted identifiers and comments alone.
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		switch c := query[i]; {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(query) && query[j] != c {
				j++
			}
			b.WriteString(query[i:min(j+1, len(query))])
			i = j
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i
			}
			b.WriteString(query[i : i+j])
			i += j - 1
		case c == '/' && i+1 < len(query) && query[i+1] == '*':
			j := strings.Index(query[i+2:], "*/")
			end := len(query)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(query[i:end])
			i = end - 1
		case c == '?':
			n++
			fmt.Fprintf(&b, "$%d", n)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
