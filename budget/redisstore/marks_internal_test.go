package redisstore

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// A call that finds a loss leaves the mark where it found it: calls of the
// same instance that find the loss at the same time all report the same
// mark held, so the replay starts from the first call lost, not one later.
func TestACallThatFindsALossLeavesTheMark(t *testing.T) {
	rdb := redistest.Start(t).Client()
	s := New(rdb, Options{})
	ctx := context.Background()
	meta := s.tag("acme") + "ceilings"
	if err := rdb.HSet(ctx, meta, s.marks.field, 4, epochField, 1).Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		raw, err := checkScript.Run(ctx, rdb, []string{meta}, s.marks.field, 10, 2000, "0").Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) != 3 || raw[0] != markLost || raw[1] != 4 || raw[2] != 1 {
			t.Fatalf("reply %v, want the loss found at mark 4 under epoch 1", raw)
		}
	}
	if v, err := rdb.HGet(ctx, meta, s.marks.field).Int64(); err != nil || v != 4 {
		t.Fatalf("mark %d after three calls that found a loss, want 4 (%v)", v, err)
	}
	// A call that finds none moves it.
	raw, err := checkScript.Run(ctx, rdb, []string{meta}, s.marks.field, 4, 2000, "0").Int64Slice()
	if err != nil || len(raw) != 1 || raw[0] != 5 {
		t.Fatalf("reply %v %v, want the new mark 5", raw, err)
	}
}

// A store that stops removes its marks: each start makes new ones, and
// the old would pile up in the orgs' meta hashes.
func TestAStoppedInstanceForgetsItsMarks(t *testing.T) {
	rdb := redistest.Start(t).Client()
	s := New(rdb, Options{})
	ctx := context.Background()
	meta := s.tag("acme") + "ceilings"
	if _, err := s.marks.run(ctx, "acme", checkScript, nil, nil, s.send(checkScript), nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.HExists(ctx, meta, s.marks.field).Result(); !n {
		t.Fatal("no mark after a marked call")
	}
	if err := s.ForgetMarks(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.HExists(ctx, meta, s.marks.field).Result(); n {
		t.Fatal("the mark is still there after ForgetMarks")
	}
}
