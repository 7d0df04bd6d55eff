package budget

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Kind says how a limit counts.
type Kind uint8

const (
	// Rate is a token bucket: Burst units of capacity refilled at Rate units
	// per Window. A settlement that costs more than was reserved may leave
	// the bucket in debt, which later requests wait out.
	Rate Kind = iota + 1
	// Ceiling is a hard budget per calendar Period: spent + pending + the new
	// estimate must not pass Amount.
	Ceiling
	// Concurrency bounds requests in flight; each takes one slot until it
	// settles or its lease expires.
	Concurrency
	// Meter counts what requests spend per calendar Period and never
	// refuses: it has no amount. It is charged at settlement (or when the
	// sweeper charges an expired reservation), never at reservation, so a
	// store need not read it when reserving. Peek reports its count as
	// Status.Spent.
	Meter
)

func (k Kind) String() string {
	switch k {
	case Rate:
		return "rate"
	case Ceiling:
		return "budget"
	case Concurrency:
		return "concurrency"
	case Meter:
		return "meter"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Unit is what a limit counts.
type Unit uint8

const (
	Tokens Unit = iota + 1
	Requests
	Microdollars
)

func (u Unit) String() string {
	switch u {
	case Tokens:
		return "tokens"
	case Requests:
		return "requests"
	case Microdollars:
		return "usd_micros"
	}
	return fmt.Sprintf("unit(%d)", uint8(u))
}

// Period is the calendar span of a Ceiling.
type Period uint8

const (
	Day Period = iota + 1
	Month
)

func (p Period) String() string {
	switch p {
	case Day:
		return "day"
	case Month:
		return "month"
	}
	return fmt.Sprintf("period(%d)", uint8(p))
}

// Scope is the level a limit is attached to. The rejection of a request
// names the scope of the limit that decided it.
type Scope uint8

const (
	ScopeOrg Scope = iota + 1
	ScopeTeam
	ScopeKey
	ScopeUser  // a user within a team
	ScopeModel // a model within a team
)

func (s Scope) String() string {
	switch s {
	case ScopeOrg:
		return "org"
	case ScopeTeam:
		return "team"
	case ScopeKey:
		return "key"
	case ScopeUser:
		return "user"
	case ScopeModel:
		return "model"
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// Limit is one bucket a request may be charged against. Limits are values:
// the config layer builds them once per key and the engine passes them to the
// store with every reservation, so a store never needs the config.
type Limit struct {
	// Bucket identifies the counter in the store. Two limits with the same
	// Bucket share state; it must be unique per (scope, id, limit name).
	Bucket string
	// Partition groups the buckets one request may touch together: the
	// org. A store may keep each partition's state apart (the Redis store
	// puts it in one cluster slot); every limit of one reservation must
	// share it.
	Partition string
	// Shard, when not zero, says the bucket is one shard of a limit split
	// to spread a hot key: its state is kept in shard Shard-1 of the
	// partition, which a store may place apart from the partition's own
	// state (the Redis store gives it another cluster slot). Every sharded
	// limit of one reservation has the same Shard; a store reserves the
	// partition's part and the shard's part all or nothing.
	Shard int
	// Name is the policy name shown to clients (RateLimit-Policy) and in
	// refusals, e.g. "team-usd-month".
	Name  string
	Scope Scope
	Kind  Kind
	Unit  Unit

	// Amount is the capacity: the refill per Window for Rate, the ceiling
	// for Ceiling, the slots for Concurrency.
	Amount int64
	// Burst is a Rate bucket's capacity; zero means Amount.
	Burst int64
	// Window is the Rate refill window (e.g. one minute).
	Window time.Duration
	// Period and Location define a Ceiling's or a Meter's calendar (nil
	// Location = UTC).
	Period Period
	// Algorithm is how a Rate limit counts (token bucket by default).
	Algorithm Algorithm
	// Shadow limits are evaluated and counted but never refuse: a request
	// they would have refused passes (and leaves their bucket untouched, as
	// if it had been refused there), so a new limit can be tried on real
	// traffic before it is enforced.
	Shadow bool
	// ClampMin, on a Ceiling, asks the gateway to clamp a request too
	// large for what the ceiling has left to the largest output cap that
	// fits, if at least ClampMin output tokens do; 0 refuses it.
	ClampMin int64
	// Location is only read at reservation time, to find the period; it is
	// not kept with an open reservation.
	Location *time.Location `json:"-"`
}

// Format writes v in l's unit for people: dollars for micro-dollars
// ("$1,200.50"), else the number and the unit ("300 tokens").
func (l *Limit) Format(v int64) string {
	if l.Unit == Microdollars {
		return Money(v).Dollars()
	}
	return strconv.FormatInt(v, 10) + " " + l.Unit.String()
}

// MaxShards bounds Limit.Shard: the shards of one partition a store keeps
// apart (each is one more place a sweeper looks in).
const MaxShards = 16

// Enforced reports whether l can refuse: not a shadow limit, not a spend
// meter. Only such a limit decides a request, bounds what fits, or is
// advertised to clients to pace by.
func (l *Limit) Enforced() bool { return !l.Shadow && l.Kind != Meter }

// Capacity is the most one bucket can ever grant at once: a Rate limit's
// burst (Amount when Burst is zero), otherwise Amount.
func (l *Limit) Capacity() int64 {
	if l.Kind == Rate && l.Burst > 0 {
		return l.Burst
	}
	return l.Amount
}

// Validate reports a limit the engine cannot enforce.
func (l *Limit) Validate() error {
	if l.Bucket == "" {
		return errors.New("budget: limit without bucket")
	}
	if partitionHasReserved(l.Partition) {
		return fmt.Errorf("budget: limit %s: partition %q contains / { } or ~", l.Bucket, l.Partition)
	}
	if l.Shard < 0 || l.Shard > MaxShards {
		return fmt.Errorf("budget: limit %s: shard %d is not in 0..%d", l.Bucket, l.Shard, MaxShards)
	}
	if l.Amount < 0 {
		return fmt.Errorf("budget: limit %s: negative amount %d", l.Bucket, l.Amount)
	}
	switch l.Kind {
	case Rate:
		if l.Amount == 0 || l.Window <= 0 || l.Burst < 0 {
			return fmt.Errorf("budget: rate limit %s needs a positive amount and window", l.Bucket)
		}
		if l.Window%time.Microsecond != 0 {
			return fmt.Errorf("budget: rate limit %s: window %s is not a whole number of microseconds", l.Bucket, l.Window)
		}
	case Ceiling:
		if l.Period != Day && l.Period != Month {
			return fmt.Errorf("budget: budget %s: unknown period %v", l.Bucket, l.Period)
		}
	case Meter:
		if l.Period != Day && l.Period != Month {
			return fmt.Errorf("budget: meter %s: unknown period %v", l.Bucket, l.Period)
		}
	case Concurrency:
		if l.Unit != Requests {
			return fmt.Errorf("budget: concurrency limit %s must count requests", l.Bucket)
		}
	default:
		return fmt.Errorf("budget: limit %s: unknown kind %v", l.Bucket, l.Kind)
	}
	if err := validateAlgorithm(l); err != nil {
		return err
	}
	if l.Unit < Tokens || l.Unit > Microdollars {
		return fmt.Errorf("budget: limit %s: unknown unit %v", l.Bucket, l.Unit)
	}
	return nil
}

// partitionHasReserved reports whether p holds '/', '{', '}' or '~'. A
// byte loop: Validate runs for every limit of every request, and
// ContainsAny builds a set of the four for each call.
func partitionHasReserved(p string) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '/', '{', '}', '~':
			return true
		}
	}
	return false
}

// Amounts is what a request takes (at reservation) or took (at settlement)
// in every unit a limit may count.
type Amounts struct {
	Tokens   int64
	Requests int64
	Cost     Money
}

// Of returns the amount in unit u.
func (a Amounts) Of(u Unit) int64 {
	switch u {
	case Tokens:
		return a.Tokens
	case Requests:
		return a.Requests
	case Microdollars:
		return int64(a.Cost)
	}
	return 0
}

// Validate refuses negative amounts.
func (a Amounts) Validate() error {
	if a.Tokens < 0 || a.Requests < 0 || a.Cost < 0 {
		return fmt.Errorf("budget: negative amounts %+v", a)
	}
	return nil
}
