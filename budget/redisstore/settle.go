package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/sony/gobreaker/v2"

	"github.com/tollgate-dev/tollgate/budget"
)

// Settle implements budget.Store. A settlement Redis cannot take is spooled
// (when the store has a spool) and reported as budget.Spooled.
func (s *Store) Settle(ctx context.Context, id string, actual budget.Amounts) (budget.Outcome, error) {
	return s.settle(ctx, id, actual, nil)
}

var _ budget.Outbox = (*Store)(nil)

// KeepsLedger implements budget.Outbox.
func (s *Store) KeepsLedger() bool { return s.opts.Ledger }

// SettleEntry implements budget.Outbox: entry goes to the ledger stream in
// the script that settles id, or with the settlement into the spool.
func (s *Store) SettleEntry(ctx context.Context, id string, actual budget.Amounts, entry *budget.Entry) (budget.Outcome, error) {
	rec, err := s.record(entry)
	if err != nil {
		return 0, err
	}
	return s.settle(ctx, id, actual, rec)
}

// record is entry as the ledger stream takes it; nil if the store keeps no
// ledger.
func (s *Store) record(entry *budget.Entry) (json.RawMessage, error) {
	if !s.opts.Ledger || entry == nil {
		return nil, nil
	}
	return json.Marshal(entry)
}

func (s *Store) settle(ctx context.Context, id string, actual budget.Amounts, rec json.RawMessage) (budget.Outcome, error) {
	if err := actual.Validate(); err != nil {
		return 0, err
	}
	if ids := s.partsOf(id); ids != nil {
		return s.settleParts(ctx, id, ids, actual, rec)
	}
	return s.settlePart(ctx, id, actual, rec)
}

// settlePart settles one reservation of one partition.
func (s *Store) settlePart(ctx context.Context, id string, actual budget.Amounts, rec json.RawMessage) (budget.Outcome, error) {
	if s.lease != nil {
		if o, handled, err := s.lease.settle(id, actual, rec); handled {
			s.mu.Lock()
			_, exactToo := s.open[id]
			s.mu.Unlock()
			if err != nil || !exactToo {
				return o, err
			}
			// Its exact part too; the ledger entry went with the local one.
			ox, err := s.settleExact(ctx, id, actual, nil)
			if ox == budget.Spooled {
				o = ox
			}
			return o, err
		}
	}
	return s.settleExact(ctx, id, actual, rec)
}

// settleExact settles a reservation made in Redis.
func (s *Store) settleExact(ctx context.Context, id string, actual budget.Amounts, rec json.RawMessage) (budget.Outcome, error) {
	s.mu.Lock()
	open, mine := s.open[id]
	again := !mine && s.settled.Has(id)
	s.mu.Unlock()
	if again {
		return budget.AlreadySettled, nil
	}
	call, err := s.settleCall(id, open.debits, mine, actual)
	if err != nil {
		return 0, err
	}
	call.Epoch, call.Record = open.epoch, rec
	// A reservation this process did not make (or an id replayed after its
	// settlement) goes to the script with no actual values: it reports a
	// tombstone or an unknown id, or charges an open reservation at its
	// reserved amounts — over, never under.
	o, err := s.run(ctx, call)
	if err != nil && errors.Is(err, budget.ErrStoreUnavailable) && s.opts.Spool != nil && len(call.Actual) > 0 {
		if serr := s.opts.Spool.Add(call); serr != nil {
			return 0, errors.Join(err, serr)
		}
		o, err = budget.Spooled, nil
	}
	if err == nil {
		s.mu.Lock()
		delete(s.open, id)
		s.mu.Unlock()
	}
	return o, err
}

// neverSent tells errors that prove a call did not reach Redis.
func neverSent(err error) bool {
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// spoolRelease queues the release of a reservation whose reserve call
// failed midway. If the reserve never ran, the release finds no record and
// does nothing.
func (s *Store) spoolRelease(r *budget.Reservation) {
	if s.opts.Spool == nil {
		return
	}
	call, err := s.settleCall(r.ID, r.Debits, true, budget.Amounts{})
	if err != nil {
		return
	}
	call.Kinds, call.Buckets = nil, nil // nothing to charge if the record is not there
	if err := s.opts.Spool.Add(call); err != nil {
		s.opts.Log.Error("spooling the release of an unanswered reservation", "reservation", r.ID, "err", err)
	}
}

// SettleCall is one settlement as the script takes it: what the spool
// writes down and replays.
type SettleCall struct {
	ID     string  `json:"id"`
	Actual []int64 `json:"actual"`
	// Epoch is the partition's epoch when the reservation was made (0: not
	// known): a record that is gone under the same epoch was settled, under
	// another one Redis lost it.
	Epoch int64 `json:"epoch,omitempty"`
	// Kinds and Buckets describe the debits, so a ceiling is still charged
	// if Redis lost the reservation record while the call waited.
	Kinds   []string `json:"kinds,omitempty"`
	Buckets []string `json:"buckets,omitempty"`
	// Unreserved marks spend made without a reservation (the store was
	// unreachable and the gateway failed open or used a local bucket):
	// there is no record to find, by design.
	Unreserved bool `json:"unreserved,omitempty"`
	// Record is the ledger entry the script appends to the ledger stream
	// when this call is the one that settles (empty: none).
	Record json.RawMessage `json:"record,omitempty"`
}

var _ budget.UnreservedRecorder = (*Store)(nil)

// RecordUnreserved implements budget.UnreservedRecorder: the ceilings among
// debits are charged actual, now if Redis answers, else from the spool.
func (s *Store) RecordUnreserved(ctx context.Context, id string, debits []budget.Debit, actual budget.Amounts, entry *budget.Entry) error {
	r := &budget.Reservation{ID: id, Debits: debits, Entry: entry}
	parts := split(r)
	if parts == nil {
		return s.recordUnreserved(ctx, id, debits, actual, entry)
	}
	var errs []error
	for _, p := range parts {
		errs = append(errs, s.recordUnreserved(ctx, p.r.ID, p.r.Debits, actual, p.r.Entry))
	}
	return errors.Join(errs...)
}

func (s *Store) recordUnreserved(ctx context.Context, id string, debits []budget.Debit, actual budget.Amounts, entry *budget.Entry) error {
	call, err := s.settleCall(id, debits, true, actual)
	if err != nil {
		return err
	}
	if call.Record, err = s.record(entry); err != nil {
		return err
	}
	for i := range call.Actual {
		if call.Kinds[i] != kCeiling {
			call.Actual[i] = 0 // rate and concurrency state had no reservation to adjust
		}
	}
	call.Unreserved = true
	if _, err := s.run(ctx, call); err == nil || !errors.Is(err, budget.ErrStoreUnavailable) {
		return err
	}
	if s.opts.Spool == nil {
		return unavailable("recording unreserved spend", errors.New("no spool"))
	}
	return s.opts.Spool.Add(call)
}

func (s *Store) settleCall(id string, debits []budget.Debit, mine bool, actual budget.Amounts) (*SettleCall, error) {
	call := &SettleCall{ID: id}
	if !mine {
		return call, nil
	}
	tag := s.tag(budget.PartitionOf(id))
	call.Actual = make([]int64, len(debits))
	call.Kinds = make([]string, len(debits))
	call.Buckets = make([]string, len(debits))
	for i := range debits {
		d := &debits[i]
		call.Kinds[i], call.Buckets[i] = kindArg(d.Limit.Kind), s.bucketKey(tag, d)
		a := actual.Of(d.Limit.Unit)
		switch {
		case d.Limit.Kind == budget.Rate && d.Limit.Algorithm != budget.TokenBucket:
			call.Actual[i] = a // a window is settled like a budget
		case d.Limit.Kind == budget.Rate:
			used, err := budget.RateCost(&d.Limit, a)
			if err != nil {
				return nil, err
			}
			reserved, err := budget.RateCost(&d.Limit, d.Amount)
			if err != nil {
				return nil, err
			}
			call.Actual[i] = used - reserved
		case d.Limit.Kind == budget.Ceiling, d.Limit.Kind == budget.Meter:
			call.Actual[i] = a
		}
	}
	return call, nil
}

// settleKeys are settle.lua's keys for reservation id.
func (s *Store) settleKeys(id string) []string {
	tag := s.tag(budget.PartitionOf(id))
	return []string{tag + "open", tag + "leases", tag + "done:" + id, tag + "ledger", tag + "ceilings", tag + "res:" + id}
}

func (s *Store) run(ctx context.Context, call *SettleCall) (budget.Outcome, error) {
	mode := modeSettle
	if call.Unreserved {
		mode = modeUnreserved
	}
	raw, err := s.runSettle(ctx, call.ID, mode, call)
	if err != nil {
		return 0, err
	}
	if raw != settleUnknown {
		s.mu.Lock()
		s.settled.Add(call.ID)
		s.mu.Unlock()
	}
	switch raw {
	case settleSettled:
		return budget.Settled, nil
	case settleBefore:
		return budget.AlreadySettled, nil
	case settleExpired:
		return budget.Expired, nil
	case settleCorrected:
		return budget.Corrected, nil
	case settleWithoutRecord:
		if call.Unreserved {
			return budget.Settled, nil
		}
		s.opts.Log.Error("settled without its reservation record: Redis lost data; ceilings were charged from the settlement, pending and rate state are gone",
			"reservation", call.ID)
		return budget.Settled, nil
	}
	return 0, budget.ErrUnknownReservation
}

// runSettle runs settle.lua for id in mode, in the next batch (batch.go);
// call nil charges the reserved amounts (the sweeper).
func (s *Store) runSettle(ctx context.Context, id string, mode settleMode, call *SettleCall) (settleOutcome, error) {
	if call == nil {
		call = &SettleCall{}
	}
	args := make([]any, 0, 7+3*len(call.Actual))
	args = append(args, id, s.nowArg(), s.opts.TombstoneTTL.Milliseconds(), int64(mode), string(call.Record), call.Epoch, len(call.Actual))
	for _, a := range call.Actual {
		args = append(args, a)
	}
	if len(call.Kinds) == len(call.Actual) && len(call.Buckets) == len(call.Actual) {
		for _, k := range call.Kinds {
			args = append(args, k)
		}
		for _, b := range call.Buckets {
			args = append(args, b)
		}
	}
	raw, err := s.batch.run(ctx, budget.PartitionOf(id), s.settleKeys(id), args)
	if err != nil {
		if isScriptError(err) {
			return 0, fmt.Errorf("redisstore: settle: %w", err)
		}
		return 0, unavailable("settle", err)
	}
	if len(raw) != 1 {
		return 0, fmt.Errorf("redisstore: settle: reply %v", raw)
	}
	return settleOutcome(raw[0]), nil
}

// kindArg is a limit kind as the scripts spell it.
func kindArg(k budget.Kind) string {
	switch k {
	case budget.Rate:
		return kRate // peek reads a window as a token bucket too: its token state is empty
	case budget.Ceiling:
		return kCeiling
	case budget.Meter:
		return kMeter
	}
	return kConcurrency
}
