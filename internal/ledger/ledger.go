// Package ledger keeps every settlement durably and reads it back for
// reports: an append-only JSON-lines file, written with group commit (each
// Append returns once its line is fsync'd, many lines sharing one fsync),
// for the embedded store; a PostgreSQL table, fed from the Redis store's
// ledger streams, in production.
package ledger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// File is an append-only ledger file. It is safe for concurrent use.
type File struct {
	path string
	reqs chan request
	done chan struct{}
	// committed is the length of the file's fsync'd complete lines.
	committed atomic.Int64
	once      sync.Once
}

type request struct {
	line []byte
	err  chan error
}

// Open opens (or creates) the ledger at path. A torn last line — a crash
// mid-write, never acknowledged — is cut off first: appending after it
// would glue the next entry to it and lose that entry.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	size, err := completeLines(f)
	if err == nil {
		err = f.Truncate(size)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ledger: cutting a torn last line: %w", err)
	}
	l := &File{path: path, reqs: make(chan request, 1024), done: make(chan struct{})}
	l.committed.Store(size)
	go l.run(f, size)
	return l, nil
}

// completeLines returns the length of f up to and including its last
// newline.
func completeLines(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	for end := st.Size(); end > 0; {
		n := min(end, int64(len(buf)))
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// groupMax bounds the lines one fsync covers.
const groupMax = 512

// run writes batches; size is the length of the file's complete lines.
// A batch that fails is cut back off the file, so a half-written line
// never sits in front of the next batch; if even that fails, every later
// append fails too rather than write after garbage.
func (l *File) run(f *os.File, size int64) {
	defer close(l.done)
	defer f.Close()
	w := bufio.NewWriterSize(f, 64<<10)
	var broken error
	for first := range l.reqs {
		batch := []request{first}
	more:
		for len(batch) < groupMax {
			select {
			case r, ok := <-l.reqs:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		err := broken
		var n int64
		for _, r := range batch {
			if err != nil {
				break
			}
			_, err = w.Write(r.line)
			n += int64(len(r.line))
		}
		if err == nil {
			err = w.Flush()
		}
		if err == nil {
			err = f.Sync()
		}
		switch {
		case err == nil:
			size += n
			l.committed.Store(size)
		case broken == nil:
			w.Reset(f)
			if terr := f.Truncate(size); terr != nil {
				broken = fmt.Errorf("ledger unusable: a failed write could not be cut off: %w", terr)
			}
		}
		for _, r := range batch {
			r.err <- err
		}
	}
}

// Path is the file's path.
func (l *File) Path() string { return l.path }

// Committed is the length of the file's lines that are on disk: a reader
// of the file (the shipper) stops there, never reading a line a failed
// write may still cut off.
func (l *File) Committed() int64 { return l.committed.Load() }

// Append writes e and returns once it is on disk.
func (l *File) Append(e budget.Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	r := request{line: append(line, '\n'), err: make(chan error, 1)}
	l.reqs <- r
	if err := <-r.err; err != nil {
		return fmt.Errorf("ledger: appending %s: %w", e.ReservationID, err)
	}
	return nil
}

// Close waits for the lines in flight and closes the file. Append must not
// be called after it.
func (l *File) Close() error {
	l.once.Do(func() { close(l.reqs) })
	<-l.done
	return nil
}

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
