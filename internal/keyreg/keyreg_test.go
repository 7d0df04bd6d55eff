package keyreg_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/keyreg"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/policy"
)

var ctx = context.Background()

func TestRedisRegistry(t *testing.T) {
	registry(t, keyreg.NewRedis(redistest.Start(t).Client(), "tg"))
}

func TestClusterRegistry(t *testing.T) {
	registry(t, keyreg.NewRedis(redistest.StartCluster(t, 3).Client(t), "tg"))
}

func TestFileRegistry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	f, err := keyreg.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	registry(t, f)
	// What was written is what a restart reads.
	again, err := keyreg.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := f.List(ctx)
	got, _ := again.List(ctx)
	if len(got) != len(want) || got[0].RevokedAt == nil || !got[0].RevokedAt.Equal(*want[0].RevokedAt) {
		t.Fatalf("after reopening: %+v, want %+v", got, want)
	}
}

// registry checks one KeyRegistry: ids are unique per org, every change
// moves the version, a key is revoked once however many revoke it at once.
func registry(t *testing.T, r policy.KeyRegistry) {
	v0, err := r.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := policy.RuntimeKey{Org: "acme", Team: "ml", ID: "bot", Hash: policy.HashKey("tg-x"), CreatedAt: time.Unix(1700000000, 0).UTC(), CreatedBy: "root"}
	if err := r.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := r.Create(ctx, k); !errors.Is(err, policy.ErrKeyExists) {
		t.Fatalf("the same id twice: %v", err)
	}
	other := k
	other.Org = "beta" // ids are per org
	if err := r.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	v1, _ := r.Version(ctx)
	if v1 == v0 {
		t.Fatal("creating keys did not move the version")
	}
	var revoked atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			got, now, err := r.Revoke(ctx, "acme", "bot", time.Unix(1700000100+int64(i), 0).UTC(), "root")
			if err != nil || got.RevokedAt == nil {
				t.Errorf("revoke: %+v %v", got, err)
			}
			if now {
				revoked.Add(1)
			}
		})
	}
	wg.Wait()
	if revoked.Load() != 1 {
		t.Fatalf("%d concurrent revocations each said they revoked the key", revoked.Load())
	}
	if _, _, err := r.Revoke(ctx, "acme", "nope", time.Now(), "root"); !errors.Is(err, policy.ErrNoKey) {
		t.Fatalf("revoking a key that does not exist: %v", err)
	}
	list, err := r.List(ctx)
	if err != nil || len(list) != 2 || list[0].Org != "acme" || list[0].RevokedAt == nil || list[1].RevokedAt != nil || list[0].Hash != k.Hash {
		t.Fatalf("list: %+v %v", list, err)
	}
	if v2, _ := r.Version(ctx); v2 == v1 {
		t.Fatal("revoking did not move the version")
	}
}
