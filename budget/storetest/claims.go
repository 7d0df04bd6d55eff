package storetest

// This file holds the cases of claims and counters (budget.Claims).

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

func claims(t *testing.T, s budget.Backend, c *Clock) {
	claim := func(partition, name string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.Claim(ctx, partition, name, ttl)
		if err != nil {
			t.Fatalf("claim %s/%s: %v", partition, name, err)
		}
		return ok
	}
	if !claim("acme", "alert:x", time.Hour) {
		t.Fatal("the first claim was refused")
	}
	if claim("acme", "alert:x", time.Hour) {
		t.Fatal("a held claim was taken twice")
	}
	if !claim("globex", "alert:x", 2*time.Hour) {
		t.Fatal("a claim of the same name in another partition was refused")
	}
	c.Advance(59 * time.Minute)
	if claim("acme", "alert:x", time.Hour) {
		t.Fatal("a claim was taken again before it lapsed")
	}
	c.Advance(time.Minute)
	if !claim("acme", "alert:x", time.Hour) {
		t.Fatal("a lapsed claim could not be taken again")
	}
	if err := s.Unclaim(ctx, "acme", "alert:x", "alert:never-taken"); err != nil {
		t.Fatal(err)
	}
	if !claim("acme", "alert:x", time.Hour) {
		t.Fatal("a claim given back could not be taken again")
	}
	if claim("globex", "alert:x", time.Hour) {
		t.Fatal("unclaiming in one partition gave back another's claim")
	}
	// Many at once: exactly one takes it.
	var took atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if ok, err := s.Claim(ctx, "acme", "nonce:n1", time.Minute); err == nil && ok {
				took.Add(1)
			}
		})
	}
	wg.Wait()
	if took.Load() != 1 {
		t.Fatalf("%d concurrent callers took one claim", took.Load())
	}
}

func counters(t *testing.T, s budget.Backend, c *Clock) {
	count := func(partition, name string, n int64) (int64, time.Duration) {
		t.Helper()
		total, left, err := s.Count(ctx, partition, name, n, time.Minute)
		if err != nil {
			t.Fatalf("count %s/%s: %v", partition, name, err)
		}
		return total, left
	}
	if total, left := count("_auth", "ip:198.51.100.1", 0); total != 0 || left != 0 {
		t.Fatalf("reading a counter never counted: %d, %v left", total, left)
	}
	if total, left := count("_auth", "ip:198.51.100.1", 1); total != 1 || left != time.Minute {
		t.Fatalf("first count: %d, %v left; want 1 and the whole minute", total, left)
	}
	c.Advance(40 * time.Second)
	if total, left := count("_auth", "ip:198.51.100.1", 2); total != 3 || left != 20*time.Second {
		t.Fatalf("later count: %d, %v left; want 3 and 20s", total, left)
	}
	if total, _ := count("_auth", "ip:198.51.100.1", 0); total != 3 {
		t.Fatalf("read: %d, want 3", total)
	}
	if total, _ := count("_other", "ip:198.51.100.1", 0); total != 0 {
		t.Fatalf("another partition's counter reads %d", total)
	}
	c.Advance(20 * time.Second)
	if total, left := count("_auth", "ip:198.51.100.1", 0); total != 0 || left != 0 {
		t.Fatalf("a lapsed counter reads %d, %v left", total, left)
	}
	if total, left := count("_auth", "ip:198.51.100.1", 1); total != 1 || left != time.Minute {
		t.Fatalf("a lapsed counter counted again: %d, %v left; want 1 and a new minute", total, left)
	}
}
