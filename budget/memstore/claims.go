package memstore

import (
	"context"
	"time"
)

// counter is one Count counter: its total and when it lapses (unix µs).
type counter struct {
	N     int64 `json:"n"`
	Until int64 `json:"until"`
}

func claimKey(partition, name string) string { return partition + "/" + name }

// Claim implements budget.Claims.
func (s *Store) Claim(ctx context.Context, partition, name string, ttl time.Duration) (bool, error) {
	now := s.now().UnixMicro()
	k := claimKey(partition, name)
	s.mu.Lock()
	if s.state.claims[k] > now {
		s.mu.Unlock()
		return false, nil
	}
	s.state.claims[k] = now + ttl.Microseconds()
	s.state.note(write{K: "l", B: k, A: s.state.claims[k]})
	p := s.commitLocked()
	s.mu.Unlock()
	// A claim (a spent bypass nonce, a fired alert) holds once it is on disk.
	if err := s.durable(p); err != nil {
		return false, err
	}
	return true, nil
}

// Unclaim implements budget.Claims.
func (s *Store) Unclaim(ctx context.Context, partition string, names ...string) error {
	s.mu.Lock()
	for _, name := range names {
		k := claimKey(partition, name)
		delete(s.state.claims, k)
		s.state.note(write{K: "l", B: k, Del: true})
	}
	p := s.commitLocked()
	s.mu.Unlock()
	return s.durable(p)
}

// Count implements budget.Claims.
func (s *Store) Count(ctx context.Context, partition, name string, n int64, window time.Duration) (int64, time.Duration, error) {
	now := s.now().UnixMicro()
	k := claimKey(partition, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.state.counts[k]
	if c.Until <= now {
		if n == 0 {
			return 0, 0, nil
		}
		c = counter{Until: now + window.Microseconds()}
	}
	c.N += n
	if n > 0 {
		s.state.counts[k] = c
		s.state.note(write{K: "t", B: k, Count: &c})
		s.commitLocked() // not waited for: a count lost to a crash only forgives failures
	}
	return c.N, time.Duration(c.Until-now) * time.Microsecond, nil
}

// forgetLapsed drops claims and counters that have lapsed at now (unix µs).
// It needs s.mu.
func (s *Store) forgetLapsed(now int64) {
	for k, until := range s.state.claims {
		if until <= now {
			delete(s.state.claims, k)
		}
	}
	for k, c := range s.state.counts {
		if c.Until <= now {
			delete(s.state.counts, k)
		}
	}
}
