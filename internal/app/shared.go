package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/tick"
)

// sharedStore is the Redis store with what runs around it: the client, the
// spool and its replay, and the watch on Redis's identity.
type sharedStore struct {
	cfg   config.Redis
	log   *slog.Logger
	rdb   redis.UniversalClient
	spool *redisstore.Spool
	store *redisstore.Store
	// pg is the PostgreSQL ledger the ledger streams are moved to, or nil.
	pg     *ledger.Postgres
	stored prometheus.Counter

	mu     sync.Mutex
	runIDs map[string]string // node address → run_id last seen

	// lost names orgs whose budget state Redis lost beyond what this
	// instance could replay: they are refused until rebuilt (App.rebuild).
	lost chan string
}

// Background intervals of the shared store.
const (
	spoolReplayInterval = 250 * time.Millisecond
	runIDCheckInterval  = 10 * time.Second
	// topologyCheckInterval is how often a cluster's slots are read again
	// while the store's breaker is not closed (Redis failing).
	topologyCheckInterval = 250 * time.Millisecond
	// markCheckInterval is how often an instance checks the orgs it wrote
	// to lately for writes Redis lost (within the 2 s failover fence).
	markCheckInterval = 500 * time.Millisecond
)

func openShared(cfg *config.Config, log *slog.Logger) (*sharedStore, error) {
	rc := cfg.Store.Redis
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:      rc.Addrs,
		MasterName: rc.MasterName,
		Username:   rc.Username,
		Password:   rc.Password,
		DB:         rc.DB,
		PoolSize:   rc.PoolSize,
		// Without this go-redis ignores context deadlines and waits its
		// own read timeout: a frozen Redis would hold requests for seconds.
		ContextTimeoutEnabled: true,
		// One dial attempt: retrying a refused connection with backoff
		// outlasts a reservation's timeout and hides a dead Redis from
		// the breaker, which does the waiting instead.
		DialerRetries: 1,
		// No command retries: a script whose reply was lost may have run,
		// and a retry would then find its own reservation and fail (or,
		// failing to dial, hide that the first attempt reached Redis).
		// The store decides what a failed call means.
		MaxRetries:   -1,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
	})
	spool, err := redisstore.OpenSpool(rc.SpoolPath)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	// "": the partition of requests under no limit at all.
	orgs := []string{""}
	for _, o := range cfg.Orgs {
		orgs = append(orgs, o.ID)
	}
	s := &sharedStore{cfg: rc, log: log, rdb: rdb, spool: spool, runIDs: map[string]string{}, lost: make(chan string, 1)}
	s.store = redisstore.New(rdb, redisstore.Options{Prefix: rc.Prefix, Timeout: rc.Timeout, SettleTimeout: rc.SettleTimeout,
		Partitions: orgs, Shards: int(cfg.ShardSlots()), Spool: spool, Log: log, Ledger: cfg.LedgerPostgres != "", Leases: leaseOptions(rc),
		ReplayWindow: rc.ReplayWindow, OnLost: func(partition string) {
			select {
			case s.lost <- partition:
			default: // a rebuild is due already; it rebuilds every lost org
			}
		}})
	if cfg.LedgerPostgres != "" {
		if s.pg, err = ledger.OpenPostgres(cfg.LedgerPostgres); err != nil {
			s.close()
			return nil, err
		}
	}
	if n := spool.Len(); n > 0 {
		log.Warn("settlements from an earlier run are waiting in the spool", "count", n, "path", rc.SpoolPath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.checkEviction(ctx); err != nil {
		s.close()
		return nil, err
	}
	if s.pg != nil {
		s.checkPersistence(ctx)
	}
	s.checkRunIDs(ctx)
	return s, nil
}

// checkPersistence warns when Redis holds the ledger's outbox without an
// append-only file: entries not yet in PostgreSQL die with the process.
func (s *sharedStore) checkPersistence(ctx context.Context) {
	aof, err := s.eachNode(ctx, func(ctx context.Context, c *redis.Client) (string, error) {
		v, err := c.ConfigGet(ctx, "appendonly").Result()
		return v["appendonly"], err
	})
	if err != nil {
		s.log.Warn("could not read Redis appendonly (CONFIG may be disabled); the ledger outbox is only as durable as Redis", "err", err)
		return
	}
	for addr, v := range aof {
		if v != "yes" {
			s.log.Warn("Redis keeps the ledger outbox without an append-only file: if it dies, settled entries not yet in PostgreSQL are lost (run it with appendonly yes)",
				"node", addr)
		}
	}
}

// checkEviction refuses a Redis that may evict keys: budget keys carry TTLs,
// so any policy but noeviction can silently drop spend under memory pressure.
func (s *sharedStore) checkEviction(ctx context.Context) error {
	policies, err := s.eachNode(ctx, func(ctx context.Context, c *redis.Client) (string, error) {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return "", err
		}
		return v["maxmemory-policy"], nil
	})
	if err != nil {
		s.log.Warn("could not read Redis maxmemory-policy (CONFIG may be disabled); make sure it is noeviction", "err", err)
		return nil
	}
	for addr, p := range policies {
		if p == "noeviction" {
			continue
		}
		if s.cfg.AllowEviction {
			s.log.Error("Redis may evict budget keys under memory pressure; spend can be lost", "node", addr, "maxmemory-policy", p)
			continue
		}
		return fmt.Errorf("redis %s has maxmemory-policy %q, which can evict budget keys and lose spend: set it to noeviction (or store.redis.allow_eviction: true to start anyway)", addr, p)
	}
	return nil
}

// checkRunIDs notices a Redis node that restarted: unless it persisted its
// data, the current periods' spend on it is gone.
func (s *sharedStore) checkRunIDs(ctx context.Context) {
	ids, err := s.eachNode(ctx, func(ctx context.Context, c *redis.Client) (string, error) {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return "", err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
				return v, nil
			}
		}
		return "", errors.New("no run_id in INFO server")
	})
	if err != nil {
		return // unreachable now: the store's own calls report that
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for addr, id := range ids {
		if old, seen := s.runIDs[addr]; seen && old != id {
			s.log.Error("Redis node restarted (run_id changed): unless it persisted its data, its budgets are gone; each instance refuses an org whose writes it finds missing until it has rebuilt them from the ledger",
				"node", addr, "old_run_id", old, "run_id", id)
		}
		s.runIDs[addr] = id
	}
}

// eachNode runs f on every node (every master of a cluster).
func (s *sharedStore) eachNode(ctx context.Context, f func(context.Context, *redis.Client) (string, error)) (map[string]string, error) {
	out := map[string]string{}
	var mu sync.Mutex
	run := func(ctx context.Context, c *redis.Client) error {
		v, err := f(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		out[c.Options().Addr] = v
		mu.Unlock()
		return nil
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, run)
	case *redis.Client:
		err = run(ctx, c)
	default:
		err = errors.New("unsupported client")
	}
	return out, err
}

func (s *sharedStore) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if n := s.spool.Len(); n > s.cfg.SpoolMax {
		return fmt.Errorf("the spool holds %d settlements, more than spool_max %d", n, s.cfg.SpoolMax)
	}
	return nil
}

// registerLeaseMetrics exposes how a leased store admits requests: most
// should be "local"; a rising "exact" share means buckets near their
// ceilings (or limits that are never leased), failures a Redis away.
func registerLeaseMetrics(reg prometheus.Registerer, store *redisstore.Store) {
	stat := func(f func(redisstore.LeaseStats) float64) func() float64 {
		return func() float64 { st, _ := store.LeaseStats(); return f(st) }
	}
	for path, f := range map[string]func(redisstore.LeaseStats) float64{
		"local":  func(st redisstore.LeaseStats) float64 { return float64(st.Local) },
		"hybrid": func(st redisstore.LeaseStats) float64 { return float64(st.Hybrid) },
		"exact":  func(st redisstore.LeaseStats) float64 { return float64(st.Exact) },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "tollgate_lease_reservations_total",
			Help:        "Reservations by how they were admitted: against this instance's leased slices (local), in part (hybrid), or in Redis (exact).",
			ConstLabels: prometheus.Labels{"path": path},
		}, stat(f)))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tollgate_lease_calls_total",
		Help: "Lease calls to Redis (flushes and takes), one per org each.",
	}, stat(func(st redisstore.LeaseStats) float64 { return float64(st.Calls) })))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tollgate_lease_call_failures_total",
		Help: "Lease calls that failed; local admission waits for one that succeeds.",
	}, stat(func(st redisstore.LeaseStats) float64 { return float64(st.Failures) })))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_lease_slices",
		Help: "Buckets this instance holds a leased slice of.",
	}, stat(func(st redisstore.LeaseStats) float64 { return float64(st.Slices) })))
}

// leaseOptions are the store's budget leases, or nil for exact reservations.
func leaseOptions(rc config.Redis) *redisstore.LeaseOptions {
	if rc.Exact {
		return nil
	}
	return &redisstore.LeaseOptions{Flush: rc.LeaseFlush, TTL: rc.LeaseTTL}
}

func (s *sharedStore) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.spool.Run(ctx, s.store, spoolReplayInterval, s.log) })
	wg.Go(func() { s.store.RunLeases(ctx) })
	if s.pg != nil {
		name, _ := os.Hostname()
		wg.Go(func() {
			// The store's partitions: the configured orgs, "" and any org
			// a reload added, once used.
			s.store.ConsumeLedger(ctx, s.pg.Insert, redisstore.ConsumerOptions{Name: name, Log: s.log,
				Stored: func(n int) { s.stored.Add(float64(n)) }})
		})
	}
	wg.Go(func() { tick.Every(ctx, runIDCheckInterval, s.checkRunIDs) })
	wg.Go(func() {
		tick.Every(ctx, markCheckInterval, func(ctx context.Context) { _ = s.store.CheckMarks(ctx, markCheckInterval) })
	})
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		// go-redis reads the cluster's slots again only every 10 s, or on
		// a MOVED reply; a master that died answers nothing, so without
		// this its slots would be refused for up to 10 s after a replica
		// took them over.
		wg.Go(func() {
			tick.Every(ctx, topologyCheckInterval, func(ctx context.Context) {
				if s.store.BreakerState() != "closed" {
					cc.ReloadState(ctx)
				}
			})
		})
	}
	wg.Wait()
}

// close makes a last attempt to empty the spool, then closes everything;
// what is still spooled stays in the spool file for the next start.
func (s *sharedStore) close() error {
	// What this instance spent of its slices is flushed and the slices
	// go back; if Redis is away, they are charged in full when their
	// lessee record expires.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := s.store.ReturnLeases(ctx); err != nil {
		s.log.Error("returning budget leases at shutdown; their slices are charged in full when they expire", "err", err)
	}
	cancel()
	if s.spool.Len() > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, _ := s.spool.Replay(ctx, s.store)
		cancel()
		if left := s.spool.Len(); left > 0 {
			s.log.Error("settlements left in the spool at shutdown; they are replayed at the next start", "count", left, "replayed", n)
		}
	}
	if s.spool.Len() == 0 {
		// Nothing of this process's is left to write: its marks go.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.store.ForgetMarks(ctx); err != nil {
			s.log.Warn("removing this instance's write marks at shutdown", "err", err)
		}
		cancel()
	}
	if s.pg != nil {
		s.pg.Close()
	}
	return errors.Join(s.spool.Close(), s.rdb.Close())
}

// redisPacer is an upstream queue's drain shared through Redis.
type redisPacer struct {
	store    *redisstore.Store
	upstream string
}

func (p redisPacer) Pace(ctx context.Context, interval, maxWait time.Duration) (time.Duration, bool, error) {
	wait, err := p.store.Pace(ctx, p.upstream, interval, maxWait)
	if errors.Is(err, redisstore.ErrPaceTooFar) {
		return wait, true, nil
	}
	return wait, false, err
}

// ledgerBacklog counts the entries in the ledger streams, read or not,
// that no instance has moved to PostgreSQL yet; -1 if Redis does not say.
func (s *sharedStore) ledgerBacklog() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n := int64(0)
	for _, org := range s.store.KnownPartitions() {
		l, err := s.rdb.XLen(ctx, s.store.LedgerStream(org)).Result()
		if err != nil {
			return -1
		}
		n += l
	}
	return float64(n)
}
