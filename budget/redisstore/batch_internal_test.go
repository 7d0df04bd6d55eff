package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// A batch that finds settle.lua missing (Redis restarted, or SCRIPT
// FLUSH) sends the calls that failed again with the script's text: every
// call gets its own reply, none a NOSCRIPT error.
func TestABatchReloadsAMissingScript(t *testing.T) {
	rdb := redistest.Start(t).Client()
	s := New(rdb, Options{SettleTimeout: 5 * time.Second})
	ctx := context.Background()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var part []*queued
	for _, id := range []string{"a/1", "a/2", "b/3"} {
		keys := append(s.settleKeys(id), s.tag(id[:1])+"ceilings")
		part = append(part, &queued{keys: keys, args: []any{id, s.nowArg(), int64(1000), int64(modeSettle), "", int64(0), 0, s.marks.field, 0, 2000, "0"}})
	}
	if err := s.batch.pipeline(ctx, rdb, part); err != nil {
		t.Fatal(err)
	}
	for i, q := range part {
		if q.err != nil || len(q.raw) != 2 || settleOutcome(q.raw[0]) != settleUnknown {
			t.Fatalf("call %d: reply %v, err %v; want an unknown reservation", i, q.raw, q.err)
		}
	}
}
