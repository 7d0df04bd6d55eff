// Package ledger keeps every settlement durably: an append-only JSON-lines
// file, written with group commit (each Append returns once its line is
// fsync'd, many lines sharing one fsync), and read back for reports.
package ledger

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/tollgate-dev/tollgate/budget"
)

// File is an append-only ledger file. It is safe for concurrent use.
type File struct {
	path string
	reqs chan request
	done chan struct{}
	once sync.Once
}

type request struct {
	line []byte
	err  chan error
}

// Open opens (or creates) the ledger at path.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	l := &File{path: path, reqs: make(chan request, 1024), done: make(chan struct{})}
	go l.run(f)
	return l, nil
}

// groupMax bounds the lines one fsync covers.
const groupMax = 512

func (l *File) run(f *os.File) {
	defer close(l.done)
	defer f.Close()
	w := bufio.NewWriterSize(f, 64<<10)
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
		var err error
		for _, r := range batch {
			if _, werr := w.Write(r.line); werr != nil && err == nil {
				err = werr
			}
		}
		if ferr := w.Flush(); ferr != nil && err == nil {
			err = ferr
		}
		if serr := f.Sync(); serr != nil && err == nil {
			err = serr
		}
		for _, r := range batch {
			r.err <- err
		}
	}
}

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
// last line (a crash mid-write, never acknowledged) is skipped.
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
	for sc.Scan() {
		var e budget.Entry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return sc.Err()
}
