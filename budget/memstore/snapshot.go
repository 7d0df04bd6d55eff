package memstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/internal/atomicfile"
	"github.com/tollgate-dev/tollgate/internal/tick"
)

// snapshotVersion changes when the file format does; an unknown version is
// refused rather than misread.
const snapshotVersion = 1

type snapshotFile struct {
	Version  int                            `json:"version"`
	Taken    time.Time                      `json:"taken"`
	Rates    map[string]int64               `json:"rates"`
	Ceilings []snapshotCeiling              `json:"ceilings"`
	InFlight map[string]int64               `json:"in_flight"`
	Open     map[string]openReservation     `json:"open"`
	Closed   map[string]closedReservation   `json:"closed"`
	Override map[string]int64               `json:"ceiling_overrides,omitempty"`
	Until    map[string]int64               `json:"ceiling_override_expiries,omitempty"`
	Previous map[string][]overrideStep      `json:"ceiling_overrides_previous,omitempty"`
	Logs     map[string]map[string][2]int64 `json:"sliding_logs,omitempty"`
	Claims   map[string]int64               `json:"claims,omitempty"`
	Counts   map[string]counter             `json:"counters,omitempty"`
	// Seq is the journal's last record the snapshot holds (journal.go).
	Seq int64 `json:"journal_seq,omitempty"`
}

type snapshotCeiling struct {
	Bucket  string `json:"bucket"`
	Period  string `json:"period"`
	Spent   int64  `json:"spent"`
	Pending int64  `json:"pending"`
}

// Snapshot writes the whole state to the snapshot file: a temporary file in
// the same directory, fsync'd, then renamed over the old one, so a crash
// leaves either the old or the new snapshot, never a torn one. The journal
// then keeps only the records after it; a store whose journal had failed
// admits again.
func (s *Store) Snapshot() error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	f := snapshotFile{
		Seq:      s.seq,
		Version:  snapshotVersion,
		Taken:    s.now().UTC(),
		Rates:    values(s.state.rates),
		InFlight: values(s.state.inflight),
		Open:     s.state.open,
		Closed:   s.state.closed,
		Override: s.state.override,
		Until:    s.state.until,
		Previous: s.state.previous,
		Logs:     s.state.logs,
		Claims:   s.state.claims,
		Counts:   s.state.counts,
	}
	for k, u := range s.state.ceilings {
		f.Ceilings = append(f.Ceilings, snapshotCeiling{k.Bucket, k.Period, u.Spent, u.Pending})
	}
	// Encoding under the lock keeps the maps consistent; it is the only
	// long hold, and it runs once per snapshot interval.
	data, err := json.Marshal(f)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("memstore: encoding snapshot: %w", err)
	}
	if err := atomicfile.Write(s.path, data); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	if err := s.compact(f.Seq); err != nil {
		// The snapshot holds the state; the journal's old records are
		// only replayed over it (each write is a value, not a change).
		return fmt.Errorf("memstore: compacting the journal: %w", err)
	}
	s.broken.Store(false)
	return nil
}

// load reads the snapshot, and returns the journal's last record it holds.
func (s *Store) load() (int64, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var f snapshotFile
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", s.path, err)
	}
	if f.Version != snapshotVersion {
		return 0, fmt.Errorf("%s: snapshot version %d, want %d", s.path, f.Version, snapshotVersion)
	}
	st := newState()
	for k, v := range f.Rates {
		st.rates[k] = &v
	}
	for k, v := range f.InFlight {
		st.inflight[k] = &v
	}
	for k, v := range f.Open {
		st.open[k] = v
	}
	for k, v := range f.Closed {
		st.closed[k] = v
	}
	for k, v := range f.Previous {
		st.previous[k] = v
	}
	for k, v := range f.Override {
		st.override[k] = v
	}
	for k, v := range f.Until {
		st.until[k] = v
	}
	for k, v := range f.Logs {
		st.logs[k] = v
	}
	for k, v := range f.Claims {
		st.claims[k] = v
	}
	for k, v := range f.Counts {
		st.counts[k] = v
	}
	for _, c := range f.Ceilings {
		st.ceilings[ceilingKey{c.Bucket, c.Period}] = &ceilingUse{c.Spent, c.Pending}
	}
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
	return f.Seq, nil
}

// Run snapshots every interval until ctx is done, then once more.
func (s *Store) Run(ctx context.Context, interval time.Duration, log *slog.Logger) {
	if s.path == "" {
		return
	}
	tick.Every(ctx, interval, func(context.Context) {
		err := s.Snapshot()
		if s.onSnapshot != nil {
			s.onSnapshot(err)
		} else if err != nil {
			log.Error("snapshotting budget state", "err", err)
		}
	})
}

// Close writes a final snapshot and closes the journal. Call it after the
// last settlement.
func (s *Store) Close() error {
	err := s.Snapshot()
	s.mu.Lock()
	j := s.journal
	s.journal = nil
	s.mu.Unlock()
	if j != nil {
		j.Close()
	}
	return err
}

var _ interface{ Close() error } = (*Store)(nil)

// values are the counters of cells that are not 0 (a 0 reads the same as
// none).
func values(cells map[string]*int64) map[string]int64 {
	m := make(map[string]int64, len(cells))
	for k, v := range cells {
		if *v != 0 {
			m[k] = *v
		}
	}
	return m
}
