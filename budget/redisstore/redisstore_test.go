package redisstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/budget/storetest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

var prefixes atomic.Int64

// contract runs the shared store contract against rdb, with leases if
// set; every case gets its own key prefix, so cases never see each other's
// keys. The contract is about what the store decides, not how fast: its 500
// concurrent reservations get a timeout a loaded 2-core CI machine under
// -race keeps (the default and what happens past it are the outage tests').
func contract(t *testing.T, rdb redis.UniversalClient, leases *redisstore.LeaseOptions) {
	storetest.Run(t, func(t *testing.T, c *storetest.Clock) budget.Backend {
		return redisstore.New(rdb, redisstore.Options{
			Prefix:  fmt.Sprintf("t%d", prefixes.Add(1)),
			Now:     c.Now,
			Timeout: 5 * time.Second,
			Leases:  leases,
		})
	})
}

func TestContractSingleNode(t *testing.T) {
	contract(t, redistest.Start(t).Client(), nil)
}

func TestContractCluster(t *testing.T) {
	contract(t, redistest.StartCluster(t, 3).Client(t), nil)
}

// The contract holds with budget leases on: requests admitted against this
// process's slices, settlements flushed in batches.
func TestContractSingleNodeLeased(t *testing.T) {
	contract(t, redistest.Start(t).Client(), &redisstore.LeaseOptions{})
}

func TestContractClusterLeased(t *testing.T) {
	contract(t, redistest.StartCluster(t, 3).Client(t), &redisstore.LeaseOptions{})
}

// Spend made without a reservation is charged to the periods of the
// engine's clock: a pinned clock in October charges October, not now.
func TestUnreservedSpendIsChargedToTheEnginesPeriod(t *testing.T) {
	rdb := redistest.Start(t).Client()
	s := redisstore.New(rdb, redisstore.Options{Prefix: "clock", Timeout: 5 * time.Second, SettleTimeout: 5 * time.Second})
	october := time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)
	e := budget.NewEngine(s, time.Minute).WithClock(func() time.Time { return october })
	team := budget.Limit{Bucket: "team:acme/ml:usd-month", Name: "usd-month", Partition: "acme", Scope: budget.ScopeTeam,
		Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: int64(budget.Dollar), Period: budget.Month}
	if err := e.RecordUnreserved(bg, []budget.Limit{team}, budget.Amounts{Requests: 1, Cost: 1234}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := rdb.HGet(bg, "clock:{acme}:c:"+team.Bucket+":2026-10", "spent").Int64()
	if err != nil || got != 1234 {
		t.Fatalf("October's spend: %d %v, want 1234", got, err)
	}
}
