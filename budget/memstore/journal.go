package memstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/appendlog"
)

// The journal makes every change durable before it is acknowledged, not
// only at the next snapshot. Each operation that changes the state writes
// one record — the values the cells it changed took, in the order the
// operations ran — to <snapshot>.journal, with group commit (many records
// share one fsync). A reservation is acknowledged, and its request
// forwarded, only once its record is on disk; so are a settlement, a
// ceiling change, a period reset and a spent bypass nonce. A snapshot
// records the last record it holds, and the journal keeps only the records
// after it. At start the store loads the snapshot and applies the records
// after it: a crash loses nothing it acknowledged. The reservations that
// were open when the process died can no longer be settled by anyone: they
// are charged in full at once, as expired.
//
// While the journal cannot be written (a full disk) the store admits
// nothing (budget.ErrStoreUnavailable) until a snapshot, which holds the
// whole state, is written again.

// write is one cell's new value, or its removal.
type write struct {
	// K is the cell's kind: r rate TAT, c ceiling use, n in flight, g
	// sliding-log entry, o open reservation, x closed reservation, v
	// run-time ceiling, l claim, t counter.
	K   string `json:"k"`
	B   string `json:"b"`           // bucket, key or reservation id
	P   string `json:"p,omitempty"` // period; a log entry's reservation id
	A   int64  `json:"a,omitempty"`
	Z   int64  `json:"z,omitempty"`
	Del bool   `json:"d,omitempty"`

	Open     *openReservation   `json:"o,omitempty"`
	Closed   *closedReservation `json:"x,omitempty"`
	Override *overrideState     `json:"v,omitempty"`
	Count    *counter           `json:"t,omitempty"`
}

// overrideState is a bucket's run-time ceiling as the journal writes it.
type overrideState struct {
	Amount   int64          `json:"amount"`
	Until    int64          `json:"until,omitempty"`
	Previous []overrideStep `json:"previous,omitempty"`
}

// record is one operation's writes, and the ledger entries it owes (a
// settlement's, a sweep's): the ledger file is written after the journal,
// so a crash between the two would lose them from the ledger but not from
// the budgets. At start those of the records after the snapshot are handed
// back (Recovered) for the ledger to take the ones it lacks.
type record struct {
	Seq int64          `json:"s"`
	W   []write        `json:"w"`
	E   []budget.Entry `json:"e,omitempty"`
}

// note records w for the operation under way, when the store keeps a
// journal. Requires Store.mu.
func (s *state) note(w write) {
	if s.journaling {
		s.writes = append(s.writes, w)
	}
}

func (s *state) noteOpen(id string) {
	if !s.journaling {
		return
	}
	if r, ok := s.open[id]; ok {
		s.note(write{K: "o", B: id, Open: &r})
	} else {
		s.note(write{K: "o", B: id, Del: true})
	}
}

func (s *state) noteClosed(id string) {
	if !s.journaling {
		return
	}
	if c, ok := s.closed[id]; ok {
		s.note(write{K: "x", B: id, Closed: &c})
	} else {
		s.note(write{K: "x", B: id, Del: true})
	}
}

func (s *state) noteOverride(bucket string) {
	if !s.journaling {
		return
	}
	if v, ok := s.override[bucket]; ok {
		s.note(write{K: "v", B: bucket, Override: &overrideState{Amount: v, Until: s.until[bucket], Previous: s.previous[bucket]}})
	} else {
		s.note(write{K: "v", B: bucket, Del: true})
	}
}

// apply sets the cell w names as the operation that wrote it left it.
func (s *state) apply(w write) error {
	switch w.K {
	case "r":
		*s.rate(w.B, true) = w.A
	case "c":
		s.SetCeilingUse(w.B, w.P, w.A, w.Z)
	case "n":
		s.SetInFlight(w.B, w.A)
	case "g":
		s.SetLogEntry(w.B, w.P, w.A, w.Z)
	case "o":
		if w.Del || w.Open == nil {
			delete(s.open, w.B)
		} else {
			s.open[w.B] = *w.Open
		}
	case "x":
		if w.Del || w.Closed == nil {
			delete(s.closed, w.B)
		} else {
			s.closed[w.B] = *w.Closed
		}
	case "v":
		delete(s.override, w.B)
		delete(s.until, w.B)
		delete(s.previous, w.B)
		if !w.Del && w.Override != nil {
			s.override[w.B] = w.Override.Amount
			if w.Override.Until != 0 {
				s.until[w.B] = w.Override.Until
			}
			if len(w.Override.Previous) > 0 {
				s.previous[w.B] = w.Override.Previous
			}
		}
	case "l":
		if w.Del {
			delete(s.claims, w.B)
		} else {
			s.claims[w.B] = w.A
		}
	case "t":
		if w.Del || w.Count == nil {
			delete(s.counts, w.B)
		} else {
			s.counts[w.B] = *w.Count
		}
	default:
		return fmt.Errorf("unknown cell kind %q", w.K)
	}
	return nil
}

// journalPath is the journal beside the snapshot at path.
func journalPath(path string) string { return path + ".journal" }

// replay applies the journal's records after the snapshot's last (seq).
// A torn last line (a crash mid-write, never acknowledged) is skipped; a
// bad line anywhere else stops the store from starting, rather than start
// on a state that misses what it acknowledged.
func (s *Store) replay(seq int64) (int, error) {
	path := journalPath(s.path)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	n, bad := 0, 0
	s.seq = seq
	for line := 1; sc.Scan(); line++ {
		if bad != 0 {
			return n, fmt.Errorf("%s: line %d is not a record", path, bad)
		}
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			bad = line
			continue
		}
		if r.Seq <= seq {
			continue // in the snapshot already
		}
		for _, w := range r.W {
			if err := s.state.apply(w); err != nil {
				return n, fmt.Errorf("%s: line %d: %w", path, line, err)
			}
		}
		s.recovered = append(s.recovered, r.E...)
		s.seq = r.Seq
		n++
	}
	return n, sc.Err()
}

// commitLocked ends an operation: the writes it noted go to the journal,
// behind every operation's before it. Wait on the result for them to be on
// disk. Requires s.mu.
func (s *Store) commitLocked() *appendlog.Pending {
	if s.journal == nil || len(s.state.writes) == 0 {
		s.state.writes, s.owed = s.state.writes[:0], nil
		return nil
	}
	s.seq++
	line, err := json.Marshal(record{Seq: s.seq, W: s.state.writes, E: s.owed})
	s.state.writes, s.owed = s.state.writes[:0], nil
	if err != nil {
		// Cannot happen (plain values); refuse rather than lose it.
		s.failed(err)
		return nil
	}
	p := s.journal.Enqueue(append(line, '\n'))
	return &p
}

// durable waits for p; a record that could not be written stops admission
// until a snapshot holds the state again.
func (s *Store) durable(p *appendlog.Pending) error {
	if p == nil {
		return nil
	}
	if err := p.Wait(); err != nil {
		s.failed(err)
		return err
	}
	return nil
}

func (s *Store) failed(err error) {
	s.broken.Store(true)
	if s.onJournal != nil {
		s.onJournal(err)
	}
}

// errJournal is why a store whose journal failed refuses reservations.
var errJournal = fmt.Errorf("memstore: the journal cannot be written: %w", budget.ErrStoreUnavailable)

// compact drops the journal's records up to seq, which a snapshot on disk
// now holds.
func (s *Store) compact(seq int64) error {
	if s.journal == nil {
		return nil
	}
	return s.journal.Rewrite(func(line []byte) bool {
		// Every record starts {"s":<seq>,
		rest, ok := bytes.CutPrefix(line, []byte(`{"s":`))
		if !ok {
			return true
		}
		end := bytes.IndexByte(rest, ',')
		if end < 0 {
			return true
		}
		n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
		return err != nil || n > seq
	})
}

// Recovered are the ledger entries of the journal's records after the
// snapshot, as the store found them at start: settlements and sweeps the
// ledger may not have received before the last process died. The caller
// appends those its ledger lacks.
func (s *Store) Recovered() []budget.Entry { return s.recovered }

var _ budget.Outbox = (*Store)(nil)

// KeepsLedger implements budget.Outbox: with a journal, a settlement's
// ledger entry goes into the journal with it (the ledger file is still
// written by the gateway).
func (s *Store) KeepsLedger() bool { return s.path != "" }

// SettleEntry implements budget.Outbox: Settle, with entry — as the ledger
// will record it — in the settlement's journal record.
func (s *Store) SettleEntry(ctx context.Context, id string, actual budget.Amounts, entry *budget.Entry) (budget.Outcome, error) {
	return s.settle(id, actual, entry)
}
