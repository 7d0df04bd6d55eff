package ledger

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/atomicfile"
)

// Shipper copies the ledger file of the embedded store into PostgreSQL:
// the file is the outbox (each entry fsync'd before its request is done),
// PostgreSQL the ledger reports read. It keeps how far it got in a file
// beside the ledger (".shipped"), so a restart resumes there; sending
// again what PostgreSQL already has stores it once (by id).
type Shipper struct {
	file *File
	sink func(context.Context, []budget.Entry) error
	log  *slog.Logger
	mark string
	// shipped is how far the file is shipped, once read from mark.
	shipped int64
	loaded  bool
}

// NewShipper ships f to sink.
func NewShipper(f *File, sink func(context.Context, []budget.Entry) error, log *slog.Logger) *Shipper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Shipper{file: f, sink: sink, log: log, mark: f.Path() + ".shipped"}
}

// shipBatch bounds the entries one sink call takes.
const shipBatch = 500

// Run ships every interval until ctx is done, then once more. A failed
// batch is retried at the next round.
func (s *Shipper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done := ctx.Err() != nil
		if _, err := s.Ship(context.WithoutCancel(ctx)); err != nil {
			s.log.Warn("ledger: shipping the file to PostgreSQL; it is retried", "err", err)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// Ship sends the committed entries not yet shipped and returns how many
// it shipped. It is not safe for concurrent use (Run calls it alone).
func (s *Shipper) Ship(ctx context.Context) (int, error) {
	offset, err := s.offset()
	if err != nil {
		return 0, err
	}
	end := s.file.Committed()
	if offset > end {
		return 0, fmt.Errorf("ledger: %s says %d bytes were shipped, the ledger has %d", s.mark, offset, end)
	}
	if offset == end {
		return 0, nil
	}
	f, err := os.Open(s.file.Path())
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.NewSectionReader(f, offset, end-offset), 64<<10)
	n := 0
	for {
		var batch []budget.Entry
		var size int64
		for len(batch) < shipBatch {
			line, err := r.ReadBytes('\n')
			if errors.Is(err, io.EOF) {
				break // the section ends at a line end
			}
			if err != nil {
				return n, err
			}
			size += int64(len(line))
			var e budget.Entry
			if err := json.Unmarshal(line, &e); err != nil {
				// The file holds only whole lines the ledger wrote;
				// keep going, and say where.
				s.log.Error("ledger: a line of the file is not an entry; not shipped", "offset", offset+size-int64(len(line)), "err", err)
				continue
			}
			batch = append(batch, e)
		}
		if size == 0 {
			return n, nil
		}
		if err := s.sink(ctx, batch); err != nil {
			return n, err
		}
		offset += size
		if err := atomicfile.Write(s.mark, []byte(strconv.FormatInt(offset, 10)+"\n")); err != nil {
			return n, err
		}
		s.shipped = offset
		n += len(batch)
	}
}

// offset is how far the file is shipped: read from mark at the first
// call, kept in memory after.
func (s *Shipper) offset() (int64, error) {
	if s.loaded {
		return s.shipped, nil
	}
	data, err := os.ReadFile(s.mark)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.shipped = 0
	case err != nil:
		return 0, err
	default:
		if s.shipped, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err != nil {
			return 0, fmt.Errorf("ledger: %s: %w", s.mark, err)
		}
	}
	s.loaded = true
	return s.shipped, nil
}
