package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed mark.lua
	markLua string
	//go:embed mark_tail.lua
	markTailLua string
)

// markScript reads an instance's mark.
var markScript = redis.NewScript(`return tonumber(redis.call("HGET", KEYS[1], ARGV[1]) or "0")`)

// checkScript writes nothing but the mark: a call that finds a loss.
var checkScript = marked("return {}")

// dropFieldScript removes a field of a partition's meta hash: its fence (its
// budgets were rebuilt), or an instance's mark (the instance stops).
var dropFieldScript = redis.NewScript(`return redis.call("HDEL", KEYS[1], ARGV[1])`)

// marked frames a script's parts in mark.lua: the script then runs only
// if Redis still holds every write it acknowledged to the calling instance.
func marked(parts ...string) *redis.Script {
	return redis.NewScript(markLua + strings.Join(parts, "") + "\n" + markTailLua)
}

// markField is an instance's mark in a partition's meta hash.
func markField(instance string) string { return "!w:" + instance }

// ErrFenced is returned for a reservation in a partition behind a failover
// fence (mark.lua): its node took over from another, or an instance found
// Redis lost its writes, and every instance is given the time to find and
// replay its own before new room is taken.
var ErrFenced = errors.New("redis failed over; new reservations wait until every instance has restored what it lost")

// ErrPartitionLost is returned for a partition Redis lost more of than this
// instance can replay (see Store.Rebuilt): its budgets are refused until
// they are rebuilt from the ledger.
var ErrPartitionLost = errors.New("redis lost this org's budget state; it is refused until rebuilt from the ledger")

// marks are this instance's write marks, one per partition, and the calls
// Redis acknowledged lately, kept to be replayed if Redis loses them.
//
// A failover to a replica that had not received the last writes (Redis
// replicates asynchronously), or a restart without its data, loses writes
// Redis acknowledged. Nothing tells the client; the next script just finds
// less than was there. Each instance therefore counts its writes to each
// partition in a mark beside them (mark.lua) and remembers every call Redis
// acknowledged for a while (Options.ReplayWindow): when a call finds its
// mark below what was acknowledged, Redis lost exactly the calls marked
// above it, and they are run again, in order, before anything else of
// that partition. A reservation is replayed as a restore (taken without a
// check: it was admitted, and its request may be under way); settlements
// and lease calls as they were sent (they are idempotent on what Redis
// holds). When Redis lost more than the window holds, or the whole
// partition (its epoch changed), the partition is refused
// (ErrPartitionLost) and Options.OnLost is told, until Rebuilt.
type marks struct {
	s      *Store
	field  string
	window time.Duration
	fence  int64 // ms

	mu    sync.Mutex
	parts map[string]*markLog
	ids   uint64
}

// markLog is one partition's mark as this instance knows it.
type markLog struct {
	known  int64     // the highest mark Redis acknowledged
	last   time.Time // when Redis last acknowledged a call
	pruned int64     // the highest mark of a call no longer kept
	epoch  int64     // the partition's epoch as this instance first saw it (0: not yet)
	gen    int64     // replays so far: a call sent before one is sent again, not replayed again
	lost   bool      // Redis lost more than can be replayed: refused until Rebuilt
	calls  []markedCall

	replay sync.Mutex // one replay at a time
}

// markedCall is a call Redis acknowledged, as it would be sent again.
type markedCall struct {
	id     uint64 // this call, among the kept ones
	mark   int64
	at     time.Time
	script *redis.Script
	keys   []string
	args   []any
}

func newMarks(s *Store, instance string, window, fence time.Duration) *marks {
	return &marks{s: s, field: markField(instance), window: window, fence: fence.Milliseconds(), parts: map[string]*markLog{}}
}

func (m *marks) part(partition string) *markLog {
	l := m.parts[partition]
	if l == nil {
		l = &markLog{}
		m.parts[partition] = l
	}
	return l
}

// sawEpoch records the partition's epoch from a reply.
func (m *marks) sawEpoch(partition string, epoch int64) {
	m.mu.Lock()
	if l := m.part(partition); l.epoch == 0 {
		l.epoch = epoch
	}
	m.mu.Unlock()
}

// sender sends one framed call: keys and args carry the mark's key and
// arguments at their ends.
type sender func(ctx context.Context, keys []string, args []any) ([]int64, error)

// send sends calls of script one by one, through the breaker.
func (s *Store) send(script *redis.Script) sender {
	return func(ctx context.Context, keys []string, args []any) (raw []int64, err error) {
		err = s.do(func() (err error) {
			raw, err = script.Run(ctx, s.rdb, keys, args...).Int64Slice()
			return err
		})
		return raw, err
	}
}

// run sends a call of script to partition through send and returns the
// body's reply. again is the call as it is to be replayed should Redis
// lose it, given the reply (nil: nothing to replay — the call wrote
// nothing that matters).
func (m *marks) run(ctx context.Context, partition string, script *redis.Script, keys []string, args []any,
	send sender, again func(reply []int64) []any) ([]int64, error) {
	meta := m.s.tag(partition) + "ceilings"
	for range 3 {
		m.mu.Lock()
		l := m.part(partition)
		known, gen, lost := l.known, l.gen, l.lost
		m.mu.Unlock()
		if lost {
			return nil, unavailable("partition "+partition, ErrPartitionLost)
		}
		raw, err := send(ctx, append(slices.Clip(keys), meta), append(slices.Clip(args), m.field, known, m.fence, "0"))
		if err != nil {
			return nil, err
		}
		if len(raw) == 3 && raw[0] == markLost {
			if err := m.recover(ctx, partition, gen, raw[1], raw[2]); err != nil {
				return nil, err
			}
			continue
		}
		if len(raw) == 0 {
			return nil, fmt.Errorf("redisstore: empty reply")
		}
		mark, body := raw[len(raw)-1], raw[:len(raw)-1]
		var replay []any
		if again != nil {
			replay = again(body)
		}
		m.acked(partition, mark, script, keys, replay)
		return body, nil
	}
	return nil, unavailable("partition "+partition, errors.New("redis keeps losing this instance's writes"))
}

// acked records that Redis acknowledged mark, and keeps the call (args
// non-nil) for the replay window.
func (m *marks) acked(partition string, mark int64, script *redis.Script, keys []string, args []any) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.part(partition)
	l.known, l.last = max(l.known, mark), now
	if args != nil {
		m.ids++
		l.calls = append(l.calls, markedCall{id: m.ids, mark: mark, at: now, script: script, keys: keys, args: args})
	}
	// Calls come back in the order they were sent, mostly: drop from the
	// front what is older than the window.
	n := 0
	for n < len(l.calls) && now.Sub(l.calls[n].at) > m.window {
		l.pruned = max(l.pruned, l.calls[n].mark)
		n++
	}
	if n > 0 {
		l.calls = slices.Delete(l.calls, 0, n)
	}
}

// recover replays what Redis lost of this instance's writes to partition:
// every kept call marked above held, in order. gen is the replay count
// when the call that found the loss was sent: if a replay ran since, that
// call is only sent again.
func (m *marks) recover(ctx context.Context, partition string, gen, held, epoch int64) error {
	m.mu.Lock()
	l := m.part(partition)
	m.mu.Unlock()
	l.replay.Lock()
	defer l.replay.Unlock()

	m.mu.Lock()
	if l.gen != gen || l.lost {
		lost := l.lost
		m.mu.Unlock()
		if lost {
			return unavailable("partition "+partition, ErrPartitionLost)
		}
		return nil
	}
	known, pruned, seen := l.known, l.pruned, l.epoch
	var calls []markedCall
	for _, c := range l.calls {
		if c.mark > held {
			calls = append(calls, c)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(calls, func(a, b markedCall) int { return int(a.mark - b.mark) })

	log := m.s.opts.Log
	if epoch == 0 || (seen != 0 && epoch != seen) || pruned > held {
		m.mu.Lock()
		l.lost = true
		l.calls = nil
		m.mu.Unlock()
		log.Error("Redis lost this org's budget state beyond what this instance can replay (a restart without data, or a failover to a replica that lagged by more than store.redis.replay_window); its requests are refused until it is rebuilt from the ledger",
			"partition", partition, "acknowledged_mark", known, "held_mark", held, "replayable_from", pruned+1, "epoch_seen", seen, "epoch_now", epoch)
		if m.s.opts.OnLost != nil {
			m.s.opts.OnLost(partition)
		}
		return unavailable("partition "+partition, ErrPartitionLost)
	}
	meta := m.s.tag(partition) + "ceilings"
	mark := held
	for i := range calls {
		c := &calls[i]
		var raw []int64
		err := m.s.do(func() (err error) {
			raw, err = c.script.Run(ctx, m.s.rdb, append(slices.Clip(c.keys), meta), append(slices.Clip(c.args), m.field, mark, m.fence, "1")...).Int64Slice()
			return err
		})
		if err != nil {
			// Stay behind: the next call finds the mark low again and
			// replays from there.
			return unavailable("replaying lost writes", err)
		}
		if len(raw) < 1 || (len(raw) == 3 && raw[0] == markLost) {
			return unavailable("replaying lost writes", fmt.Errorf("reply %v", raw))
		}
		mark = raw[len(raw)-1]
		m.mu.Lock()
		for j := range l.calls {
			if l.calls[j].id == c.id {
				l.calls[j].mark = mark
			}
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	// The mark Redis holds now is the truth: what was acknowledged above
	// it and not kept wrote nothing that mattered.
	l.known = mark
	l.gen++
	m.mu.Unlock()
	m.s.lostWrites.Add(int64(len(calls)))
	log.Error("Redis lost writes it had acknowledged (a failover to a replica that lagged?); replayed them",
		"partition", partition, "acknowledged_mark", known, "held_mark", held, "replayed", len(calls))
	return nil
}

// Rebuilt tells the store that partition's budgets were rebuilt from the
// ledger after Redis lost them: its requests are served again. The
// rebuild counted every settlement the ledger holds, so a leased store
// charges from here on only what it had not flushed, and holds no slice
// until it takes one again (Redis lost what it held).
func (s *Store) Rebuilt(ctx context.Context, partition string) error {
	if s.lease != nil {
		s.lease.rebase(partition)
	}
	m := s.marks
	m.mu.Lock()
	l := m.part(partition)
	m.mu.Unlock()
	l.replay.Lock()
	defer l.replay.Unlock()
	// The mark Redis holds now is where this instance goes on from.
	var held int64
	err := s.do(func() (err error) {
		held, err = markScript.Run(ctx, s.rdb, []string{s.tag(partition) + "ceilings"}, m.field).Int64()
		return err
	})
	if err != nil {
		return unavailable("reading a mark", err)
	}
	m.mu.Lock()
	l.known, l.pruned, l.epoch, l.lost, l.calls = held, held, 0, false, nil
	l.gen++
	m.mu.Unlock()
	// The budgets are whole again: the fence the loss raised goes.
	if err := s.do(func() error {
		return dropFieldScript.Run(ctx, s.rdb, []string{s.tag(partition) + "ceilings"}, fenceField).Err()
	}); err != nil {
		return unavailable("lifting a fence", err)
	}
	return nil
}

// CheckMarks makes a call that writes nothing but this instance's mark to
// every partition it wrote to within the replay window and has not called
// in the last interval, so that a write Redis lost is found — and replayed,
// or the partition refused — within interval of a failover even where no
// request comes: within the fence (Options.FailoverFence) that keeps the
// others from taking the room the lost writes held.
func (s *Store) CheckMarks(ctx context.Context, interval time.Duration) error {
	m := s.marks
	now := time.Now()
	var due []string
	m.mu.Lock()
	for p, l := range m.parts {
		if !l.lost && len(l.calls) > 0 && now.Sub(l.last) >= interval {
			due = append(due, p)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, p := range due {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		_, err := m.run(ctx, p, checkScript, nil, nil, s.send(checkScript), nil)
		cancel()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (m *marks) isLost(partition string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.parts[partition]
	return l != nil && l.lost
}

// LostPartitions are the partitions refused until they are rebuilt.
func (s *Store) LostPartitions() []string {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	var out []string
	for p, l := range s.marks.parts {
		if l.lost {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// LostWrites counts the acknowledged writes Redis lost and this instance
// replayed.
func (s *Store) LostWrites() int64 { return s.lostWrites.Load() }

// ForgetMarks removes this instance's marks from the orgs it wrote to, at
// shutdown: a process's marks are of no use once it is gone, and each
// start makes new ones.
func (s *Store) ForgetMarks(ctx context.Context) error {
	m := s.marks
	m.mu.Lock()
	parts := make([]string, 0, len(m.parts))
	for p := range m.parts {
		parts = append(parts, p)
	}
	m.mu.Unlock()
	var errs []error
	for _, p := range parts {
		errs = append(errs, s.do(func() error {
			return dropFieldScript.Run(ctx, s.rdb, []string{s.tag(p) + "ceilings"}, m.field).Err()
		}))
	}
	return errors.Join(errs...)
}
