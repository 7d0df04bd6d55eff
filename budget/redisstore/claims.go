package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed claim.lua
	claimLua string
	//go:embed unclaim.lua
	unclaimLua string
	//go:embed count.lua
	countLua string

	claimScript   = redis.NewScript(claimLua)
	unclaimScript = redis.NewScript(unclaimLua)
	countScript   = redis.NewScript(countLua)
)

// Claims and counters live under their partition's hash tag, beside its
// budgets: "claim:<name>" and "count:<name>". Each is one key that expires
// by itself; none is touched by a reservation or leased.

// Claim implements budget.Claims: one script call.
func (s *Store) Claim(ctx context.Context, partition, name string, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var took int64
	err := s.do(func() (err error) {
		took, err = claimScript.Run(ctx, s.rdb, []string{s.tag(partition) + "claim:" + name}, s.nowArg(), ttl.Microseconds()).Int64()
		return err
	})
	if err != nil {
		return false, unavailable("claiming", err)
	}
	return took == 1, nil
}

// Unclaim implements budget.Claims: one script call (the names share
// their partition's slot).
func (s *Store) Unclaim(ctx context.Context, partition string, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = s.tag(partition) + "claim:" + name
	}
	if err := s.do(func() error { return unclaimScript.Run(ctx, s.rdb, keys).Err() }); err != nil {
		return unavailable("unclaiming", err)
	}
	return nil
}

// Count implements budget.Claims: one script call.
func (s *Store) Count(ctx context.Context, partition, name string, n int64, window time.Duration) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var raw []int64
	err := s.do(func() (err error) {
		raw, err = countScript.Run(ctx, s.rdb, []string{s.tag(partition) + "count:" + name}, s.nowArg(), n, window.Microseconds()).Int64Slice()
		return err
	})
	if err != nil {
		return 0, 0, unavailable("counting", err)
	}
	if len(raw) != 2 {
		return 0, 0, fmt.Errorf("redisstore: count: reply %v", raw)
	}
	return raw[0], time.Duration(raw[1]) * time.Microsecond, nil
}
