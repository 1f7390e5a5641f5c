package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// fileLocker is goose's session locker for SQLite: an exclusive flock on a
// file beside the database, held while goose migrates. flock locks are
// independent of the POSIX locks SQLite takes on the database itself, and
// the kernel drops them when the process dies.
type fileLocker struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func (l *fileLocker) SessionLock(ctx context.Context, _ *sql.Conn) error {
	var f *os.File
	for {
		var err error
		if f, err = tryFlock(l.path); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		if f != nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migration lock %s: %w", l.path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	l.mu.Lock()
	l.f = f
	l.mu.Unlock()
	return nil
}

func (l *fileLocker) SessionUnlock(context.Context, *sql.Conn) error {
	l.mu.Lock()
	f := l.f
	l.f = nil
	l.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Close() // closing the last descriptor releases the flock
}

// tryFlock takes an exclusive flock on the file at path (created if
// missing) without waiting: the open file holding it, or nil when another
// open file holds it. Closing the file releases the lock.
func tryFlock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
