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
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/httpapi"
)

// sweepInterval is how often expired leases are looked for.
const sweepInterval = 5 * time.Second

// App is one running gateway.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	store   *memstore.Store
	engine  *budget.Engine
	gateway *httpapi.Gateway
}

// New wires a gateway for cfg.
func New(cfg *config.Config, log *slog.Logger) (*App, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	store, err := memstore.New(memstore.Options{SnapshotPath: cfg.Store.SnapshotPath})
	if err != nil {
		return nil, fmt.Errorf("opening the embedded store: %w", err)
	}
	engine := budget.NewEngine(store, cfg.Lease)
	gw, err := httpapi.New(cfg, httpapi.Options{Engine: engine, Log: log})
	if err != nil {
		return nil, fmt.Errorf("building the gateway: %w", err)
	}
	return &App{cfg: cfg, log: log, store: store, engine: engine, gateway: gw}, nil
}

// Handler returns the gateway's HTTP handler.
func (a *App) Handler() http.Handler { return a.gateway }

// Engine returns the budget engine.
func (a *App) Engine() *budget.Engine { return a.engine }

// Store returns the embedded store.
func (a *App) Store() *memstore.Store { return a.store }

// ShutdownTimeout bounds how long in-flight requests may take to finish.
const ShutdownTimeout = 30 * time.Second

// Serve serves on ln until ctx is done, then stops accepting, lets in-flight
// requests finish (up to ShutdownTimeout), sweeps and writes a last snapshot.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           a.gateway,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { a.engine.RunSweeper(bg, sweepInterval, a.log) })
	wg.Go(func() { a.store.Run(bg, a.cfg.Store.SnapshotInterval, a.log) })

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.log.Info("serving", "addr", ln.Addr().String(), "store", a.cfg.Store.Kind)

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		a.log.Info("shutting down: finishing in-flight requests", "timeout", ShutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
		<-errc
	}
	stopBG()
	wg.Wait()
	if cerr := a.store.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
