package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
)

// SetCeiling implements budget.Admin: one script (setceiling.lua) that
// writes the hash field every instance's next reservation reads. A
// temporary override is kept as "amount@until" (unix µs), followed by what
// it lapses to; the scripts read the first still in force, by the same
// clock they charge periods with.
func (s *Store) SetCeiling(ctx context.Context, partition, bucket string, amount int64, until time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	key := s.tag(partition) + "ceilings"
	var u int64
	if !until.IsZero() {
		u = until.UnixMicro()
	}
	// Marked (marks.go): a change Redis acknowledged and then lost in a
	// failover is written again, not silently undone.
	args := []any{bucket, amount, u, s.nowArg()}
	if _, err := s.marks.run(ctx, partition, ceilingScript, []string{key}, args, s.send(ceilingScript),
		func([]int64) []any { return args }); err != nil {
		if isScriptError(err) {
			return fmt.Errorf("redisstore: setting a ceiling: %w", err)
		}
		return unavailable("setting a ceiling", err)
	}
	if s.lease != nil {
		// This instance's next reservation sees the change at once; others
		// at their next flush (a slice they hold meanwhile was taken under
		// the old ceiling).
		return s.lease.flush(ctx, partition, nil)
	}
	return nil
}

// Lapse implements budget.Admin: one script (lapse.lua), marked like a
// ceiling change.
func (s *Store) Lapse(ctx context.Context, partition, bucket string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	args := []any{bucket, s.nowArg()}
	raw, err := s.marks.run(ctx, partition, lapseScript, []string{s.tag(partition) + "ceilings"}, args, s.send(lapseScript),
		func([]int64) []any { return args })
	if err != nil {
		return false, unavailable("ending a ceiling change", err)
	}
	if s.lease != nil {
		if err := s.lease.flush(ctx, partition, nil); err != nil {
			return false, err
		}
	}
	return len(raw) == 1 && raw[0] == 1, nil
}

// Schedule implements budget.Admin: one script (schedule.lua), marked like
// a ceiling change.
func (s *Store) Schedule(ctx context.Context, partition, bucket string, amount, configured int64, from time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	args := []any{bucket, amount, from.UnixMicro(), configured, s.nowArg()}
	raw, err := s.marks.run(ctx, partition, scheduleScript, []string{s.tag(partition) + "ceilings"}, args, s.send(scheduleScript),
		func([]int64) []any { return args })
	if err != nil {
		if isScriptError(err) {
			return false, fmt.Errorf("redisstore: scheduling a ceiling: %w", err)
		}
		return false, unavailable("scheduling a ceiling", err)
	}
	return len(raw) == 1 && raw[0] == 1, nil
}

// Override implements budget.Admin: one HGET, judged by this process's
// clock (or Options.Now); the scripts judge by Redis's, so around the
// expiry the two may disagree for the clock skew.
func (s *Store) Override(ctx context.Context, partition, bucket string) (int64, time.Time, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var v string
	err := s.do(func() (err error) {
		v, err = s.rdb.(redis.Cmdable).HGet(ctx, s.tag(partition)+"ceilings", bucket).Result()
		if errors.Is(err, redis.Nil) {
			v, err = "", nil
		}
		return err
	})
	if err != nil {
		return 0, time.Time{}, false, unavailable("reading a ceiling", err)
	}
	if v == "" {
		return 0, time.Time{}, false, nil
	}
	// As override.lua reads it: the first change still in force.
	now := s.now()
	for _, step := range strings.Split(v, ";") {
		a, u, temporary := strings.Cut(step, "@")
		amount, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return 0, time.Time{}, false, fmt.Errorf("redisstore: ceiling of %s: bad value %q", bucket, v)
		}
		if !temporary {
			return amount, time.Time{}, true, nil
		}
		us, err := strconv.ParseInt(u, 10, 64)
		if err != nil {
			return 0, time.Time{}, false, fmt.Errorf("redisstore: ceiling of %s: bad value %q", bucket, v)
		}
		if until := time.UnixMicro(us); now.Before(until) {
			return amount, until, true, nil
		}
	}
	return 0, time.Time{}, false, nil
}

// ResetSpent implements budget.Admin: the current period is the one the
// store's clock (or Options.Now) is in, as for Peek.
func (s *Store) ResetSpent(ctx context.Context, l budget.Limit) (string, int64, error) {
	if err := s.flushFor(ctx, partitionOf(&l)); err != nil {
		return "", 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	now := s.now()
	ds := []budget.Debit{{Limit: l}}
	budget.SetPeriods(ds, now)
	var was int64
	err := s.do(func() (err error) {
		was, err = resetScript.Run(ctx, s.rdb, []string{s.bucketKey(s.tag(partitionOf(&l)), &ds[0])}).Int64()
		return err
	})
	if err != nil {
		return "", 0, unavailable("resetting a period", err)
	}
	return ds[0].Period, was, nil
}

// RaiseSpent implements budget.Admin.
func (s *Store) RaiseSpent(ctx context.Context, l budget.Limit, spent int64) (int64, error) {
	if spent < 0 {
		return 0, fmt.Errorf("redisstore: negative spend %d", spent)
	}
	if err := s.flushFor(ctx, partitionOf(&l)); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	ds := []budget.Debit{{Limit: l}}
	budget.SetPeriods(ds, s.now())
	var was int64
	err := s.do(func() (err error) {
		was, err = raiseScript.Run(ctx, s.rdb, []string{s.bucketKey(s.tag(partitionOf(&l)), &ds[0])}, spent, ceilingRetention(l.Period).Milliseconds()).Int64()
		return err
	})
	if err != nil {
		return 0, unavailable("raising a period's spend", err)
	}
	return was, nil
}

// ErrPaceTooFar: the upstream's next free slot is further away than the
// caller would wait; nothing was taken.
var ErrPaceTooFar = errors.New("redisstore: the upstream's next slot is too far away")

// Pace takes the next slot of upstream's shared drain for a request that
// occupies interval of it, and returns how long to wait for that slot. All
// instances sharing the Redis share the drain, so together they send at the
// configured rate. A slot further than maxWait is not taken: the error is
// ErrPaceTooFar and wait says how far it was.
func (s *Store) Pace(ctx context.Context, upstream string, interval, maxWait time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	key := s.opts.Prefix + ":{pace:" + upstream + "}:drain"
	var raw []int64
	err := s.do(func() (err error) {
		raw, err = paceScript.Run(ctx, s.rdb, []string{key}, interval.Microseconds(), maxWait.Microseconds(), s.nowArg()).Int64Slice()
		return err
	})
	if err != nil {
		return 0, unavailable("pacing", err)
	}
	if raw[0] < 0 {
		return time.Duration(raw[1]) * time.Microsecond, ErrPaceTooFar
	}
	return time.Duration(raw[0]) * time.Microsecond, nil
}
