package main

import (
	"runtime/debug"
	"testing"
)

// TestSetGCPercent: server.gc_percent is the collector's target unless
// GOGC is set, which wins.
func TestSetGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	noEnv := func(string) (string, bool) { return "", false }
	if !setGCPercent(400, noEnv) {
		t.Fatal("not applied without GOGC")
	}
	if got := debug.SetGCPercent(100); got != 400 {
		t.Fatalf("collector target %d, want 400", got)
	}
	withEnv := func(k string) (string, bool) { return "50", k == "GOGC" }
	if setGCPercent(400, withEnv) {
		t.Fatal("applied over GOGC")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("collector target %d after GOGC won, want 100 (untouched)", got)
	}
}
