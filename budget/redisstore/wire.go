package redisstore

import (
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// The scripts' wire: the names each script's header declares between its
// "wire:" and "end wire" lines, with the same values (wire_test.go reads
// the headers and keeps the two equal).
const (
	// Debit kinds (kinds.lua, prepended to reserve.lua and settle.lua).
	kRate        = "r" // K_RATE: a token bucket
	kCeiling     = "c" // K_CEILING: a ceiling period, or a fixed window
	kSliding     = "s" // K_SLIDING: a sliding window
	kLog         = "g" // K_LOG: a sliding log
	kConcurrency = "n" // K_CONCURRENCY
	kMeter       = "m" // K_METER: a ceiling only charged at settlement

	debitFields      = 8        // DEBIT_FIELDS: reserve arguments per debit
	sliceFields      = 10       // SLICE_FIELDS: lease arguments per bucket
	leaseReplyFields = 7        // REPLY_FIELDS: lease reply values per bucket
	epochField       = "!epoch" // EPOCH_FIELD: the partition's epoch in its meta hash

	markLost    = -100      // MARK_LOST (mark.lua): Redis lost writes it acknowledged
	fenceField  = "!fence"  // FENCE_FIELD (mark.lua): until when the partition is fenced (unix µs)
	replidField = "!replid" // REPLID_FIELD (mark.lua): the replication id of the node that last wrote it
)

// reserveStatus is reserve.lua's first reply value.
type reserveStatus int64

const (
	reserveAllowed     reserveStatus = 1  // ALLOWED
	reserveRefused     reserveStatus = 0  // REFUSED
	reserveDuplicate   reserveStatus = -1 // DUPLICATE
	reserveOutOfPeriod reserveStatus = -2 // OUT_OF_PERIOD
	reserveFenced      reserveStatus = -3 // FENCED
)

// settleOutcome is settle.lua's reply.
type settleOutcome int64

const (
	settleUnknown       settleOutcome = 0 // UNKNOWN
	settleSettled       settleOutcome = 1 // SETTLED
	settleBefore        settleOutcome = 2 // SETTLED_BEFORE
	settleExpired       settleOutcome = 3 // EXPIRED
	settleWithoutRecord settleOutcome = 4 // WITHOUT_RECORD
	settleCorrected     settleOutcome = 5 // CORRECTED
)

// settleMode is settle.lua's ARGV[4].
type settleMode int64

const (
	modeSettle     settleMode = 1 // MODE_SETTLE
	modeUnreserved settleMode = 2 // MODE_UNRESERVED
	modeExpire     settleMode = 3 // MODE_EXPIRE
)

// debitArg is one debit as reserve.lua takes it: debitFields values.
type debitArg struct {
	kind     string
	amount   int64 // units; a token bucket's cost in µs
	capacity int64 // the limit; a token bucket's tolerance in µs
	start    int64 // period or window start, unix µs (a log: its window µs)
	end      int64 // period or window end, unix µs
	name     string
	shadow   bool
	keep     time.Duration
}

func (d *debitArg) appendTo(args []any) []any {
	shadow := "0"
	if d.shadow {
		shadow = "1"
	}
	return append(args, d.kind, d.amount, d.capacity, d.start, d.end, d.name, shadow, d.keep.Milliseconds())
}

// reserveReply is reserve.lua's reply, decoded.
type reserveReply struct {
	status   reserveStatus
	now      time.Time
	epoch    int64
	counters []budget.Counters
}

func decodeReserve(raw []int64, debits int) (reserveReply, error) {
	if len(raw) < 3 {
		return reserveReply{}, fmt.Errorf("redisstore: reserve: short reply %v", raw)
	}
	r := reserveReply{status: reserveStatus(raw[0]), now: time.UnixMicro(raw[1]), epoch: raw[2]}
	if r.status != reserveAllowed && r.status != reserveRefused {
		return r, nil
	}
	if len(raw) != 3+5*debits {
		return reserveReply{}, fmt.Errorf("redisstore: reserve: reply of %d values for %d debits", len(raw), debits)
	}
	r.counters = decodeCounters(raw[3:], debits)
	return r, nil
}

// decodeCounters reads n groups of (tat, spent, pending, in-flight,
// run-time ceiling or -1) from a script's reply.
func decodeCounters(raw []int64, n int) []budget.Counters {
	out := make([]budget.Counters, n)
	for i := range out {
		c := raw[5*i:]
		out[i] = budget.Counters{TAT: c[0], Spent: c[1], Pending: c[2], InFlight: c[3], Override: c[4], HasOverride: c[4] >= 0}
	}
	return out
}
