// Package appendlog is an append-only file of lines written with group
// commit: a line is acknowledged once it is fsync'd, many lines sharing one
// fsync, in the order they were enqueued. The ledger file and the embedded
// store's journal are written with it.
package appendlog

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// File is an append-only file of lines. It is safe for concurrent use.
type File struct {
	path string
	reqs chan request
	done chan struct{}
	// committed is the length of the file's fsync'd complete lines.
	committed atomic.Int64
	once      sync.Once
}

// request is a line to append, or (keep non-nil) a rewrite of the file.
type request struct {
	line []byte
	keep func(line []byte) bool
	err  chan error
}

// Pending is an enqueued line: Wait returns once it is on disk.
type Pending struct{ err chan error }

// Wait returns once the line is fsync'd, or why it could not be.
func (p Pending) Wait() error { return <-p.err }

// Open opens (or creates) the file at path. A torn last line — a crash
// mid-write, never acknowledged — is cut off first: appending after it
// would glue the next line to it and lose that line.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	size, err := completeLines(f)
	if err == nil {
		err = f.Truncate(size)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cutting a torn last line: %w", err)
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
	defer func() { f.Close() }()
	w := bufio.NewWriterSize(f, 64<<10)
	var broken error
	var next *request // a rewrite met while gathering a batch: it goes after the batch
	closed := false
	for !closed || next != nil {
		var first request
		if next != nil {
			first, next = *next, nil
		} else {
			r, ok := <-l.reqs
			if !ok {
				return
			}
			first = r
		}
		if first.keep != nil {
			nf, n, err := l.rewrite(f, first.keep)
			if err == nil {
				f, size = nf, n
				w.Reset(f)
				l.committed.Store(size)
			}
			first.err <- err
			continue
		}
		batch := []request{first}
	more:
		for len(batch) < groupMax {
			select {
			case r, ok := <-l.reqs:
				if !ok {
					closed = true
					break more
				}
				if r.keep != nil {
					next = &r
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
				broken = fmt.Errorf("%s unusable: a failed write could not be cut off: %w", l.path, terr)
			}
		}
		for _, r := range batch {
			r.err <- err
		}
	}
}

// rewrite writes the lines of f that keep keeps to a new file, fsync'd,
// and renames it over f's path: a crash leaves the old file or the new.
func (l *File) rewrite(f *os.File, keep func([]byte) bool) (*os.File, int64, error) {
	data, err := os.ReadFile(l.path)
	if err != nil {
		return nil, 0, err
	}
	var out []byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if keep(data[:i]) {
			out = append(out, data[:i+1]...)
		}
		data = data[i+1:]
	}
	tmp := l.path + ".tmp"
	nf, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, err
	}
	if _, err = nf.Write(out); err == nil {
		err = nf.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, l.path)
	}
	if err != nil {
		nf.Close()
		os.Remove(tmp)
		return nil, 0, err
	}
	f.Close()
	return nf, int64(len(out)), nil
}

// Path is the file's path.
func (l *File) Path() string { return l.path }

// Committed is the length of the file's lines that are on disk: a reader
// of the file stops there, never reading a line a failed write may still
// cut off.
func (l *File) Committed() int64 { return l.committed.Load() }

// Enqueue queues line (which must end in a newline) behind every line
// queued before it.
func (l *File) Enqueue(line []byte) Pending {
	r := request{line: line, err: make(chan error, 1)}
	l.reqs <- r
	return Pending{r.err}
}

// Append writes line and returns once it is on disk.
func (l *File) Append(line []byte) error { return l.Enqueue(line).Wait() }

// Rewrite keeps only the lines keep keeps, after every line queued before
// it is written: the file is written anew and renamed over the old one.
func (l *File) Rewrite(keep func(line []byte) bool) error {
	r := request{keep: keep, err: make(chan error, 1)}
	l.reqs <- r
	return <-r.err
}

// Close waits for the lines in flight and closes the file. Nothing may be
// enqueued after it.
func (l *File) Close() error {
	l.once.Do(func() { close(l.reqs) })
	<-l.done
	return nil
}
