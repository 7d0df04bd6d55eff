package redisstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/budget/storetest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

var prefixes atomic.Int64

// contract runs the shared store contract against rdb; every case gets its
// own key prefix, so cases never see each other's keys.
func contract(t *testing.T, rdb redis.UniversalClient) {
	storetest.Run(t, func(t *testing.T, c *storetest.Clock) budget.Store {
		return redisstore.New(rdb, redisstore.Options{
			Prefix: fmt.Sprintf("t%d", prefixes.Add(1)),
			Now:    c.Now,
		})
	})
}

func TestContractSingleNode(t *testing.T) {
	contract(t, redistest.Start(t).Client())
}

func TestContractCluster(t *testing.T) {
	contract(t, redistest.StartCluster(t, 3).Client(t))
}
