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
//
// Of the statements with more than stmtCacheBigArgs parameters, a
// connection keeps only the last one. Those are the multi-row INSERTs
// (insertRows), whose text changes with their row count: the API's use
// records (a batch of whatever number of uses arrived meanwhile) kept a
// statement for every row count met, up to stmtCacheMax of them on each
// connection, at about 1 KiB of SQLite's memory (outside the Go heap) a
// row; in the page benchmark the SQLite portal's RSS grew by 20 to 30 MiB
// in its API run. The one kept is what a long insert's statements of
// rowsPerInsert rows each share.

const stmtCacheMax = 256

// stmtCacheBigArgs: a statement with more parameters than this is a big
// one (at most one kept per connection).
const stmtCacheBigArgs = 64

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
	big   string // the text of the big statement kept in stmts ("": none)
}

type cachedStmt struct {
	st   driver.Stmt
	busy bool // rows of this statement are open
}

type stmtQueryExec interface {
	driver.StmtQueryContext
	driver.StmtExecContext
}

// cached returns the connection's statement for query (of args
// parameters), prepared now if needed, or nil when it cannot be cached (in
// use, or not a single statement the driver can run with context).
func (c *stmtConn) cached(ctx context.Context, query string, args int) (*cachedStmt, error) {
	if cs := c.stmts[query]; cs != nil {
		if cs.busy {
			return nil, nil
		}
		return cs, nil
	}
	big := args > stmtCacheBigArgs
	if big && c.big != "" {
		// The big statement kept until now gives way, unless it is in use.
		if cs := c.stmts[c.big]; cs != nil && cs.busy {
			return nil, nil
		} else if cs != nil {
			cs.st.Close()
			delete(c.stmts, c.big)
		}
		c.big = ""
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
				if q == c.big {
					c.big = ""
				}
			}
		}
	}
	cs := &cachedStmt{st: st}
	c.stmts[query] = cs
	if big {
		c.big = query
	}
	return cs, nil
}

func (c *stmtConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.cached(ctx, query, len(args))
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
	cs, err := c.cached(ctx, query, len(args))
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
