package redisstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/atomicfile"
	"github.com/tollgate-dev/tollgate/internal/tick"
)

// Spool keeps settlements that could not reach Redis: in memory and in an
// append-only file, each line fsync'd before Settle returns, so a crash
// right after loses nothing. Replay applies them through the same
// idempotent script, so a settlement replayed twice (or applied by Redis
// just before the connection broke) is charged once.
type Spool struct {
	path string

	mu      sync.Mutex
	f       *os.File
	pending []*SettleCall
}

// OpenSpool opens (or creates) the spool file at path and loads the
// settlements still in it. An empty path keeps the spool in memory only.
func OpenSpool(path string) (*Spool, error) {
	sp := &Spool{path: path}
	if path == "" {
		return sp, nil
	}
	if err := sp.load(); err != nil {
		return nil, fmt.Errorf("redisstore: loading spool %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redisstore: opening spool: %w", err)
	}
	sp.f = f
	return sp, nil
}

func (sp *Spool) load() error {
	f, err := os.Open(sp.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var c SettleCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			// A torn last line (a crash mid-write) was never acknowledged.
			continue
		}
		sp.pending = append(sp.pending, &c)
	}
	return sc.Err()
}

// Add keeps one settlement durably.
func (sp *Spool) Add(c *SettleCall) error {
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.f != nil {
		if _, err := sp.f.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("redisstore: spooling %s: %w", c.ID, err)
		}
		if err := sp.f.Sync(); err != nil {
			return fmt.Errorf("redisstore: spooling %s: %w", c.ID, err)
		}
	}
	sp.pending = append(sp.pending, c)
	return nil
}

// Len is the number of settlements waiting.
func (sp *Spool) Len() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.pending)
}

// Replay applies waiting settlements through s until one fails because
// Redis is still unavailable. It returns how many were applied.
func (sp *Spool) Replay(ctx context.Context, s *Store) (int, error) {
	sp.mu.Lock()
	calls := append([]*SettleCall(nil), sp.pending...)
	sp.mu.Unlock()
	done := 0
	var err error
	for _, c := range calls {
		if _, err = s.run(ctx, c); err != nil && errors.Is(err, budget.ErrStoreUnavailable) {
			break
		}
		// Settled, already settled, expired or unknown: resolved either way.
		err = nil
		done++
	}
	if done == 0 {
		return 0, err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.pending = sp.pending[done:]
	if rerr := sp.rewrite(); rerr != nil {
		return done, errors.Join(err, rerr)
	}
	return done, err
}

// rewrite replaces the file with what is still pending. Requires sp.mu.
func (sp *Spool) rewrite() error {
	if sp.f == nil {
		return nil
	}
	var data []byte
	for _, c := range sp.pending {
		line, err := json.Marshal(c)
		if err != nil {
			return err
		}
		data = append(append(data, line...), '\n')
	}
	if err := atomicfile.Write(sp.path, data); err != nil {
		return err
	}
	old := sp.f
	f, err := os.OpenFile(sp.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		// The old handle now points at the replaced file: appends through
		// it would not survive a crash. Report it loudly (Replay's caller
		// logs it); the next rewrite tries again.
		return fmt.Errorf("redisstore: reopening spool: %w", err)
	}
	sp.f = f
	old.Close()
	return nil
}

// Run replays the spool every interval until ctx is done.
func (sp *Spool) Run(ctx context.Context, s *Store, interval time.Duration, log *slog.Logger) {
	tick.Every(ctx, interval, func(ctx context.Context) {
		if sp.Len() == 0 {
			return
		}
		n, err := sp.Replay(ctx, s)
		if n > 0 {
			log.Info("replayed spooled settlements", "count", n, "left", sp.Len())
		}
		if err != nil && !errors.Is(err, budget.ErrStoreUnavailable) {
			log.Error("replaying spooled settlements", "err", err)
		}
	})
}

// Close closes the spool file.
func (sp *Spool) Close() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.f == nil {
		return nil
	}
	err := sp.f.Close()
	sp.f = nil
	return err
}
