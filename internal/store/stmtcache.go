package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	sqlite "modernc.org/sqlite"
)

// SQLite statements are prepared once per connection and kept (issue 15):
// preparing (parsing and planning) a query took about a fifth of a page's
// CPU when every call prepared its text afresh. database/sql hands a
// connection to one goroutine at a time, so a connection's cache needs no
// lock. A statement is used by one query at a time: a query whose cached
// statement still has open rows (the same text run again inside a
// transaction while the first rows are read) runs on a statement of its
// own, as before. At most stmtCacheMax statements per connection; past it,
// the idle ones are closed and the cache starts over. PostgreSQL needs none
// of this: pgx caches its prepared statements per connection itself.

const stmtCacheMax = 256

// stmtPrepares counts the statements stmtConn prepared for its cache (tests).
var stmtPrepares atomic.Int64

// sqliteConnector is modernc's connector for a DSN (the registered "sqlite"
// driver's), its connections wrapped in stmtConn.
type sqliteConnector struct{ driver.Connector }

func newSQLiteConnector(dsn string) (driver.Connector, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sqliteConnector{c}, nil
}

func (c sqliteConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, errors.New("store: the sqlite driver's connection lacks the context methods")
	}
	return &stmtConn{sqliteConn: inner, stmts: map[string]*cachedStmt{}}, nil
}

// sqliteConn is what database/sql uses of a modernc connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type stmtConn struct {
	sqliteConn
	stmts map[string]*cachedStmt
}

type cachedStmt struct {
	st   driver.Stmt
	busy bool // rows of this statement are open
}

type stmtQueryExec interface {
	driver.StmtQueryContext
	driver.StmtExecContext
}

// cached returns the connection's statement for query, prepared now if
// needed, or nil when it cannot be cached (in use, or not a single
// statement the driver can run with context).
func (c *stmtConn) cached(ctx context.Context, query string) (*cachedStmt, error) {
	if cs := c.stmts[query]; cs != nil {
		if cs.busy {
			return nil, nil
		}
		return cs, nil
	}
	st, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	stmtPrepares.Add(1)
	if _, ok := st.(stmtQueryExec); !ok {
		st.Close()
		return nil, nil
	}
	if len(c.stmts) >= stmtCacheMax {
		for q, cs := range c.stmts {
			if !cs.busy {
				cs.st.Close()
				delete(c.stmts, q)
			}
		}
	}
	cs := &cachedStmt{st: st}
	c.stmts[query] = cs
	return cs, nil
}

func (c *stmtConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.cached(ctx, query)
	if err != nil || cs == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := cs.st.(stmtQueryExec).QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	cs.busy = true
	return &cachedRows{Rows: rows, cs: cs}, nil
}

func (c *stmtConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.cached(ctx, query)
	if err != nil || cs == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	return cs.st.(stmtQueryExec).ExecContext(ctx, args)
}

func (c *stmtConn) Close() error {
	for _, cs := range c.stmts {
		cs.st.Close()
	}
	c.stmts = nil
	return c.sqliteConn.Close()
}

// cachedRows frees its statement for the next query when closed.
type cachedRows struct {
	driver.Rows
	cs *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.cs.busy = false
	return err
}
