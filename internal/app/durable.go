package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/tick"
)

// durable keeps the record the gateway owes: a ledger entry whose write
// failed (a full or failing disk) is held in memory and written again
// every second until it is on disk, and while one waits the gateway
// admits nothing — spend it could not record is spend it does not take
// on (gateway.ErrLedgerUnavailable) — and /readyz fails. A snapshot that
// could not be written fails /readyz until one is. Every failure is
// counted (tollgate_ledger_write_failures_total,
// tollgate_snapshot_failures_total) and logged.
type durable struct {
	ledger *ledger.File
	log    *slog.Logger

	mu      sync.Mutex
	backlog []budget.Entry
	waiting atomic.Int64 // len(backlog), read on every admission
	snapErr atomic.Pointer[error]

	ledgerFailures, snapshotFailures, journalFailures prometheus.Counter
	backlogSize                                       prometheus.Gauge
}

func newDurable(reg prometheus.Registerer, log *slog.Logger) *durable {
	d := &durable{log: log,
		ledgerFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_ledger_write_failures_total",
			Help: "Ledger writes that failed (a full or failing disk); their entries are held and written again, and the gateway admits nothing meanwhile."}),
		snapshotFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_snapshot_failures_total",
			Help: "Embedded-store snapshots that could not be written; /readyz fails until one is."}),
		journalFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_journal_write_failures_total",
			Help: "Embedded-store journal writes that failed; nothing is admitted, and /readyz fails, until a snapshot is written."}),
		backlogSize: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_ledger_backlog_entries",
			Help: "Ledger entries held in memory because their write failed, waiting to be written."}),
	}
	reg.MustRegister(d.ledgerFailures, d.snapshotFailures, d.journalFailures, d.backlogSize)
	return d
}

// errSnapshot is /readyz's error while the last snapshot failed.
var errSnapshot = errors.New("the embedded store's last snapshot could not be written")

// append writes e to the ledger, or holds it when the write fails (or
// others are already held: they go first).
func (d *durable) append(e budget.Entry) {
	if d.ledger == nil {
		return
	}
	if d.waiting.Load() == 0 {
		err := d.ledger.Append(e)
		if err == nil {
			return
		}
		d.ledgerFailures.Inc()
		d.log.Error("writing the ledger failed: the entry is held and written again, and nothing is admitted meanwhile", "reservation", e.ReservationID, "err", err)
	}
	d.mu.Lock()
	d.backlog = append(d.backlog, e)
	d.waiting.Store(int64(len(d.backlog)))
	d.backlogSize.Set(float64(len(d.backlog)))
	d.mu.Unlock()
}

// flush writes the held entries in order, up to the first that fails.
func (d *durable) flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	written := 0
	for _, e := range d.backlog {
		if err := d.ledger.Append(e); err != nil {
			d.ledgerFailures.Inc()
			d.log.Error("writing the ledger failed again", "held", len(d.backlog)-written, "err", err)
			break
		}
		written++
	}
	if written > 0 && written == len(d.backlog) {
		d.log.Info("the ledger is written again: every held entry is on disk", "entries", written)
	}
	d.backlog = append(d.backlog[:0], d.backlog[written:]...)
	d.waiting.Store(int64(len(d.backlog)))
	d.backlogSize.Set(float64(len(d.backlog)))
}

// run writes the held entries every interval until ctx ends.
func (d *durable) run(ctx context.Context, interval time.Duration) {
	if d.ledger == nil {
		return
	}
	tick.Every(ctx, interval, func(context.Context) {
		if d.waiting.Load() > 0 {
			d.flush()
		}
	})
}

// close writes the held entries a last time; those that still cannot be
// written go to the log whole, so they can be put back into the ledger
// by hand (the budgets have their spend).
func (d *durable) close() {
	if d.waiting.Load() == 0 {
		return
	}
	d.flush()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.backlog {
		d.log.Error("a ledger entry could not be written before shutdown", "reservation", e.ReservationID, "entry", e)
	}
}

// admitting is the gateway's check before it takes on spend: an error
// while ledger entries wait to be written.
func (d *durable) admitting() error {
	if d.waiting.Load() > 0 {
		return gateway.ErrLedgerUnavailable
	}
	return nil
}

// snapshotted notes a snapshot's outcome.
func (d *durable) snapshotted(err error) {
	if err == nil {
		d.snapErr.Store(nil)
		return
	}
	d.snapshotFailures.Inc()
	d.snapErr.Store(&err)
	d.log.Error("snapshotting budget state failed: /readyz fails until a snapshot is written", "err", err)
}

// journaled notes a journal write that failed: the store admits nothing
// until a snapshot is written, and /readyz fails meanwhile.
func (d *durable) journaled(err error) {
	d.journalFailures.Inc()
	e := fmt.Errorf("the embedded store's journal could not be written; it admits nothing until a snapshot is: %w", err)
	d.snapErr.Store(&e)
	d.log.Error("writing the embedded store's journal failed: nothing is admitted until a snapshot is written", "err", err)
}

// ready is an error while entries wait or the last snapshot failed.
func (d *durable) ready() error {
	if err := d.admitting(); err != nil {
		return err
	}
	if p := d.snapErr.Load(); p != nil {
		return errors.Join(errSnapshot, *p)
	}
	return nil
}
