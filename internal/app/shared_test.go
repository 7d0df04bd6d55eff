package app

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/policy"
)

func redisConfig(t *testing.T, addr, extra string) *config.Config {
	t.Helper()
	src := "store:\n  kind: redis\n  redis:\n    addrs:\n      - " + addr + "\n" + extra +
		"upstreams: [{name: u, base_url: \"http://127.0.0.1:1/v1\", models: [m]}]\n" +
		"models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}\n" +
		"orgs: [{id: o, teams: [{id: t, keys: [{id: k, hash: \"" + policy.HashKey("k") + "\"}]}]}]\n"
	c, err := config.Parse([]byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A Redis that may evict keys would silently drop spend: refused unless the
// operator says otherwise.
func TestStartRefusesAnEvictingRedis(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
	_, err := New(redisConfig(t, srv.Addr, ""), nil)
	if err == nil || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("err = %v, want a refusal naming the policy", err)
	}
	var logs bytes.Buffer
	a, err := New(redisConfig(t, srv.Addr, "    allow_eviction: true\n"), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !strings.Contains(logs.String(), "may evict budget keys") {
		t.Fatalf("no warning logged: %s", logs.String())
	}
}

// A Redis that restarts (and so may have lost its data) is reported.
func TestRedisRestartIsReported(t *testing.T) {
	srv := redistest.Start(t)
	var logs bytes.Buffer
	a, err := New(redisConfig(t, srv.Addr, ""), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := a.ready(context.Background()); err == nil {
		t.Fatal("ready with Redis down")
	}
	srv.Restart()
	a.shared.checkRunIDs(context.Background())
	if !strings.Contains(logs.String(), "run_id changed") {
		t.Fatalf("restart not reported: %s", logs.String())
	}
}

// /readyz fails while more settlements wait than spool_max allows.
func TestReadyReportsAFullSpool(t *testing.T) {
	srv := redistest.Start(t)
	a, err := New(redisConfig(t, srv.Addr, "    spool_max: 1\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.shared.spool.Add(&redisstore.SettleCall{ID: "x/y"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.ready(context.Background()); err == nil || !strings.Contains(err.Error(), "spool") {
		t.Fatalf("ready with 2 spooled and spool_max 1: %v", err)
	}
}
