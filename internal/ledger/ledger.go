// Package ledger keeps every settlement durably and reads it back for
// reports: an append-only JSON-lines file, written with group commit (each
// Append returns once its line is fsync'd, many lines sharing one fsync),
// for the embedded store; a PostgreSQL table, fed from the Redis store's
// ledger streams, in production.
package ledger

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/appendlog"
)

// File is an append-only ledger file. It is safe for concurrent use.
type File struct {
	f *appendlog.File
}

// Open opens (or creates) the ledger at path. A torn last line — a crash
// mid-write, never acknowledged — is cut off first: appending after it
// would glue the next entry to it and lose that entry.
func Open(path string) (*File, error) {
	f, err := appendlog.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &File{f: f}, nil
}

// Path is the file's path.
func (l *File) Path() string { return l.f.Path() }

// Committed is the length of the file's lines that are on disk: a reader
// of the file (the shipper) stops there, never reading a line a failed
// write may still cut off.
func (l *File) Committed() int64 { return l.f.Committed() }

// Append writes e and returns once it is on disk.
func (l *File) Append(e budget.Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := l.f.Append(append(line, '\n')); err != nil {
		return fmt.Errorf("ledger: appending %s: %w", e.ReservationID, err)
	}
	return nil
}

// Close waits for the lines in flight and closes the file. Append must not
// be called after it.
func (l *File) Close() error { return l.f.Close() }

// Read calls fn for every entry in the ledger at path, oldest first. A torn
// last line (a crash mid-write, never acknowledged) is skipped; a bad line
// anywhere else is an error, never silently dropped spend.
func Read(path string, fn func(budget.Entry) error) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	bad := 0 // the line number of an unreadable line, until another follows it
	for line := 1; sc.Scan(); line++ {
		if bad != 0 {
			return fmt.Errorf("ledger %s: line %d is not an entry", path, bad)
		}
		var e budget.Entry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			bad = line
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Source is a ledger reports read: the file, or PostgreSQL.
type Source interface {
	// Scan calls fn for every entry whose time is in [from, to).
	Scan(ctx context.Context, from, to time.Time, fn func(budget.Entry) error) error
}

// FileSource is the ledger file at its path, as a Source.
type FileSource string

// Scan implements Source.
func (path FileSource) Scan(_ context.Context, from, to time.Time, fn func(budget.Entry) error) error {
	return Read(string(path), func(e budget.Entry) error {
		if e.Time.Before(from) || !e.Time.Before(to) {
			return nil
		}
		return fn(e)
	})
}
