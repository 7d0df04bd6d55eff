// Package app is the composition root: it builds the store, the budget
// engine and the gateway from a config, runs their background loops and
// shuts everything down in order. It holds wiring only.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/admin"
	"github.com/tollgate-dev/tollgate/internal/audit"
	"github.com/tollgate-dev/tollgate/internal/authguard"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/httpapi"
	"github.com/tollgate-dev/tollgate/internal/keyreg"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/internal/tracing"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/queue"
)

// sweepInterval is how often expired leases are looked for.
const sweepInterval = 5 * time.Second

// App is one running gateway.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	store   budget.Backend
	mem     *memstore.Store // the embedded store, or nil
	shared  *sharedStore    // the Redis store, or nil
	engine  *budget.Engine
	gateway *gateway.Gateway
	server  *httpapi.Server
	reg     *prometheus.Registry
	// stopTracing flushes and stops the tracer provider; nil: off.
	stopTracing func(context.Context) error
	ledger      *ledger.File       // nil without ledger_path
	shipper     *ledger.Shipper    // the embedded store's ledger file to PostgreSQL, or nil
	pg          *ledger.Postgres   // the PostgreSQL ledger, or nil
	keys        policy.KeyRegistry // run-time API keys, or nil
	durable     *durable           // the ledger's held entries and the snapshot's health

	perAddressRefused prometheus.Counter // connections closed past server.max_connections_per_address
	admin             *admin.API
}

// keyRefreshInterval bounds how long a key revoked on another instance
// keeps working here.
const keyRefreshInterval = time.Second

// shipInterval is how often the embedded store's ledger file is shipped
// to PostgreSQL.
const shipInterval = time.Second

// alertGrace is how long shutdown waits for alerts still being sent.
const alertGrace = 5 * time.Second

// New wires a gateway for cfg.
func New(cfg *config.Config, log *slog.Logger) (*App, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &App{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	a.durable = newDurable(a.reg, log)
	a.perAddressRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_connections_refused_per_address_total",
		Help: "Connections closed at once because their client address held server.max_connections_per_address already."})
	a.reg.MustRegister(a.perAddressRefused)
	for _, w := range cfg.Warnings() {
		log.Warn("config: " + w)
	}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.openStore(); err != nil {
		return nil, err
	}
	a.engine = budget.NewEngine(a.store, cfg.Lease)
	guard := authguard.New(a.engine) // one count of failures for API keys and admin tokens
	opts, err := a.gatewayOptions(metrics.New(a.reg))
	if err != nil {
		a.Close()
		return nil, err
	}
	if opts.Tracer, a.stopTracing, err = tracing.Setup(context.Background(), cfg.Tracing, version()); err != nil {
		a.Close()
		return nil, fmt.Errorf("tracing: %w", err)
	}
	gw, err := gateway.New(cfg, opts)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("building the gateway: %w", err)
	}
	a.gateway = gw
	a.reg.MustRegister(metrics.NewTopRefusedKeys(gw.TopRefusedKeys))
	srv := httpapi.Options{Ready: a.ready, Guard: guard}
	if cfg.MetricsListen == "" {
		srv.Gatherer = a.reg
	}
	a.server = httpapi.New(gw, srv)
	if err := a.openLedger(); err != nil {
		a.Close()
		return nil, err
	}
	a.mountAdmin(guard)
	return a, nil
}

// openStore opens the budget store cfg names, with its metrics.
func (a *App) openStore() error {
	if a.cfg.Store.Kind != "redis" {
		mem, err := memstore.New(memstore.Options{SnapshotPath: a.cfg.Store.SnapshotPath, OnExpire: a.recordExpired,
			OnSnapshot: a.durable.snapshotted, OnJournal: a.durable.journaled})
		if err != nil {
			return fmt.Errorf("opening the embedded store: %w", err)
		}
		// A snapshot path that cannot be written is found now, not at
		// the first periodic snapshot (or never, read-only).
		if err := mem.Snapshot(); err != nil {
			return fmt.Errorf("opening the embedded store: its snapshot cannot be written: %w", err)
		}
		a.mem, a.store = mem, mem
		return nil
	}
	shared, err := openShared(a.cfg, a.log)
	if err != nil {
		return err
	}
	a.shared, a.store = shared, shared.store
	if shared.pg != nil {
		shared.stored = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_ledger_entries_stored_total",
			Help: "Ledger entries this instance moved from the Redis ledger streams to PostgreSQL.",
		})
		a.reg.MustRegister(shared.stored)
		a.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tollgate_ledger_backlog",
			Help: "Ledger entries waiting in the Redis ledger streams for PostgreSQL (all instances').",
		}, shared.ledgerBacklog))
	}
	a.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tollgate_store_lost_writes_total",
		Help: "Writes Redis acknowledged and then lost (a failover to a replica that lagged), which this instance wrote again.",
	}, func() float64 { return float64(shared.store.LostWrites()) }))
	a.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_store_orgs_lost",
		Help: "Orgs refused (503) because Redis lost their budget state beyond what this instance could replay, until rebuilt from the ledger.",
	}, func() float64 { return float64(len(shared.store.LostPartitions())) }))
	a.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_spool_depth",
		Help: "Settlements waiting in the spool for the budget store.",
	}, func() float64 { return float64(shared.spool.Len()) }))
	if _, leased := shared.store.LeaseStats(); leased {
		registerLeaseMetrics(a.reg, shared.store)
	}
	a.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_store_breaker_open",
		Help: "1 while the budget store's breaker is open (Redis failing; answering unavailable at once), 0.5 half-open, 0 closed.",
	}, func() float64 {
		switch shared.store.BreakerState() {
		case "open":
			return 1
		case "half-open":
			return 0.5
		}
		return 0
	}))
	return nil
}

// gatewayOptions are the gateway's collaborators on the store opened: on
// Redis a local fallback bucket, the shared pacer and settlements after
// the response; the run-time key registry either way.
func (a *App) gatewayOptions(m *metrics.Metrics) (gateway.Options, error) {
	opts := gateway.Options{Engine: a.engine, Log: a.log, Metrics: m, Admitting: a.durable.admitting}
	if a.shared != nil {
		// The local bucket of routes in local_fallback mode: in memory
		// only, it holds this instance's share while Redis is away.
		local, err := memstore.New(memstore.Options{})
		if err != nil {
			return opts, err
		}
		opts.Fallback = budget.NewEngine(local, a.cfg.Lease)
		// A settlement may cost a round trip to Redis: not on the
		// client's connection.
		opts.SettleAfterResponse = true
		opts.Pacer = func(upstream string) queue.Pacer { return redisPacer{a.shared.store, upstream} }
	}
	switch {
	case a.shared != nil:
		a.keys = keyreg.NewRedis(a.shared.rdb, a.cfg.Store.Redis.Prefix)
	case a.cfg.KeysPath != "":
		reg, err := keyreg.OpenFile(a.cfg.KeysPath)
		if err != nil {
			return opts, err
		}
		a.keys = reg
	}
	opts.Keys = a.keys
	return opts, nil
}

// openLedger opens the ledger file (and, on the embedded store, its
// shipper to PostgreSQL) and hands it every settlement. On Redis the file
// is this instance's local copy only: the ledger every instance reports
// is PostgreSQL, which the Redis store's ledger streams feed with every
// instance's entries, sweeps included (config refuses the file alone).
func (a *App) openLedger() error {
	if a.cfg.LedgerPath == "" {
		return nil
	}
	var err error
	if a.ledger, err = ledger.Open(a.cfg.LedgerPath); err != nil {
		return err
	}
	if a.cfg.Store.Kind == "embedded" && a.cfg.LedgerPostgres != "" {
		if a.pg, err = ledger.OpenPostgres(a.cfg.LedgerPostgres); err != nil {
			return err
		}
		a.shipper = ledger.NewShipper(a.ledger, a.pg.Insert, a.log)
	}
	a.durable.ledger = a.ledger
	a.gateway.OnSettle(a.durable.append)
	if a.mem != nil {
		return a.catchUpLedger()
	}
	return nil
}

// catchUpLedger appends to the ledger the entries the embedded store's
// journal owed it and it does not have: a process that died between a
// settlement's journal record and its ledger line (the budget has the
// spend; the ledger would not).
func (a *App) catchUpLedger() error {
	owed := a.mem.Recovered()
	if len(owed) == 0 {
		return nil
	}
	have := map[string]bool{}
	if err := ledger.Read(a.cfg.LedgerPath, func(e budget.Entry) error { have[e.ID()] = true; return nil }); err != nil {
		return err
	}
	n := 0
	for _, e := range owed {
		if have[e.ID()] {
			continue
		}
		if err := a.ledger.Append(e); err != nil {
			return fmt.Errorf("writing to the ledger the entries of the last run: %w", err)
		}
		have[e.ID()] = true
		n++
	}
	if n > 0 {
		a.log.Warn("the last run stopped between settlements and their ledger lines; the ledger has them now", "entries", n)
	}
	return nil
}

// mountAdmin adds the admin API to the gateway's router, with the ledger
// and the audit trail every instance reads: beside the ledger in
// PostgreSQL, else in Redis (audit_path keeps a local copy); the embedded
// store's is audit_path.
func (a *App) mountAdmin(guard *authguard.Guard) {
	api := admin.New(a.cfg, a.engine, a.log).WithGuard(guard).WithRefusedKeys(a.gateway.TopRefusedKeys)
	a.admin = api
	if a.keys != nil {
		api.WithKeys(a.gateway)
	}
	var trail audit.Log
	switch {
	case a.shared != nil && a.shared.pg != nil:
		api.WithLedger(a.shared.pg)
		trail = audit.NewPostgres(a.shared.pg)
	case a.pg != nil:
		api.WithLedger(a.pg)
	case a.shared != nil:
		trail = audit.NewRedis(a.shared.rdb, a.cfg.Store.Redis.Prefix)
	}
	if trail != nil {
		if a.cfg.AuditPath != "" {
			trail = audit.Copy{Shared: trail, Local: audit.NewFile(a.cfg.AuditPath)}
		}
		api.WithAudit(trail)
	}
	a.server.Mount(api.Mount)
}

// recordExpired writes the ledger entry of a reservation the embedded
// store's sweeper charged in full (its gateway crashed before settling).
func (a *App) recordExpired(e budget.Entry) {
	a.durable.append(e)
}

// ready reports whether the gateway can serve: its store answers.
func (a *App) ready(ctx context.Context) error {
	if err := a.durable.ready(); err != nil {
		return err
	}
	if a.shared != nil {
		return a.shared.ready(ctx)
	}
	return nil
}

// Reload reads the config file at path and applies it from the next
// request on. An invalid file, or one that changes what needs a restart, is
// refused with its errors and the running config stays.
func (a *App) Reload(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		a.log.Error("reload refused: the running config stays", "err", err)
		return err
	}
	if err := a.gateway.Reload(cfg); err != nil {
		a.log.Error("reload refused: the running config stays", "err", err)
		return err
	}
	// What the admin API, page and audit trail show is what is now
	// enforced.
	if err := a.admin.Reloaded(context.Background(), a.gateway.Settings().Config()); err != nil {
		a.log.Error("config reloaded, but its limit changes could not all be written to the audit trail", "err", err)
	}
	a.log.Info("config reloaded", "path", path)
	return nil
}

// Registry returns the Prometheus registry every collector is on.
func (a *App) Registry() *prometheus.Registry { return a.reg }

// Gateway returns the gateway.
func (a *App) Gateway() *gateway.Gateway { return a.gateway }

// Handler returns the gateway's HTTP handler.
func (a *App) Handler() http.Handler { return a.server }

// Engine returns the budget engine.
func (a *App) Engine() *budget.Engine { return a.engine }

// Store returns the embedded store, or nil when budgets live in Redis.
func (a *App) Store() *memstore.Store { return a.mem }

// settleBudget is how long the requests whose exchanges were ended at
// the drain budget have to settle.
const settleBudget = 10 * time.Second

// Serve serves on ln until ctx is done, then stops accepting, lets in-flight
// requests finish (within server.drain_timeout), and persists what must survive:
// the embedded store's snapshot, or the Redis store's spool.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	// Slow clients are bounded: headers by ReadHeaderTimeout, bodies by
	// the gateway's body deadline (server.body_timeout, min_body_rate),
	// idle keep-alive connections by IdleTimeout, and how many connections
	// are open at once by MaxConnections (more wait to be accepted).
	srv := &http.Server{
		Handler:           a.server,
		ReadHeaderTimeout: a.cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       a.cfg.Server.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	if n := a.cfg.Server.MaxConnectionsPerAddress; n > 0 {
		ln = limitPerAddress(ln, n, a.perAddressRefused)
	}
	if n := a.cfg.Server.MaxConnections; n > 0 {
		ln = netutil.LimitListener(ln, n)
	}
	stopBG := a.Background(context.WithoutCancel(ctx))

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if a.cfg.MetricsListen != "" {
		// The probes answer here too, on a listener of their own that no
		// client connection can starve.
		mux := http.NewServeMux()
		mux.Handle("/", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
		mux.Handle("/healthz", a.server)
		mux.Handle("/readyz", a.server)
		msrv := &http.Server{Addr: a.cfg.MetricsListen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		mln, err := net.Listen("tcp", a.cfg.MetricsListen)
		if err != nil {
			srv.Close()
			<-errc
			stopBG()
			return fmt.Errorf("listening for metrics: %w", err)
		}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
	}
	a.log.Info("serving", "addr", ln.Addr().String(), "store", a.cfg.Store.Kind)

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		// The drain budget (server.drain_timeout): in-flight requests
		// finish — streams, and answers read to their usage for clients
		// that left. Exchanges still live then are ended and charged their
		// reservations, which settleBudget bounds the settling of.
		a.log.Info("shutting down: finishing in-flight requests", "drain_budget", a.cfg.Server.DrainTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), a.cfg.Server.DrainTimeout)
		err = srv.Shutdown(sctx)
		cancel()
		if err != nil {
			// Past the drain budget: the upstream exchanges still read
			// (streams, answers drained for a client that left) are ended,
			// each charged its reservation, and their handlers settle them.
			n := a.gateway.EndExchanges()
			a.log.Warn("shutting down: drain budget spent; ended the upstream exchanges still in flight, each charged its reservation", "exchanges", n)
			sctx, cancel = context.WithTimeout(context.Background(), settleBudget)
			err = srv.Shutdown(sctx)
			cancel()
		}
		<-errc
	}
	a.gateway.Drain() // settlements of the last responses, before the store goes
	stopBG()
	if cerr := a.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Background starts the loops that run beside the server: the lease
// sweeper, and the embedded store's snapshots or the Redis store's spool
// replay and restart watch. The returned function stops them and waits.
func (a *App) Background(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { a.engine.RunSweeper(ctx, sweepInterval, a.log) })
	wg.Go(func() { a.durable.run(ctx, time.Second) })
	if a.mem != nil {
		wg.Go(func() { a.mem.Run(ctx, a.cfg.Store.SnapshotInterval, a.log) })
	}
	if a.shared != nil {
		wg.Go(func() { a.shared.run(ctx) })
		wg.Go(func() { a.rebuildLost(ctx) })
	}
	if a.keys != nil {
		wg.Go(func() { a.gateway.RunKeyRefresh(ctx, keyRefreshInterval) })
	}
	if a.shipper != nil {
		wg.Go(func() { a.shipper.Run(ctx, shipInterval) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// Close persists what must survive — the embedded store's snapshot, or
// the Redis store's spool — and releases the store. Call it after the last
// request.
func (a *App) Close() error {
	if a.gateway != nil {
		a.gateway.Drain()
		a.gateway.StopAlerts(alertGrace)
	}
	if a.stopTracing != nil {
		// The spans of the last requests, settlements included.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.stopTracing(ctx); err != nil {
			a.log.Warn("flushing traces", "err", err)
		}
		cancel()
	}
	if a.ledger != nil {
		a.durable.close()
		a.ledger.Close()
	}
	if a.pg != nil {
		a.pg.Close()
	}
	if a.mem != nil {
		return a.mem.Close()
	}
	if a.shared != nil {
		return a.shared.close()
	}
	return nil
}

// version is the module version the binary was built as.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Version
	}
	return ""
}
