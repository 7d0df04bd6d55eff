package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
)

// LedgerSink stores ledger entries durably, all or none. Delivery is at
// least once, so it must store an entry id once however often it gets it.
type LedgerSink func(ctx context.Context, entries []budget.Entry) error

// ConsumerOptions tune ConsumeLedger.
type ConsumerOptions struct {
	// Group is the consumer group every instance joins (default
	// "tollgate-ledger"): each stream entry goes to one of them.
	Group string
	// Name is this consumer's name in the group; keep it across restarts
	// (the host name, by default) so a restarted instance finishes what it
	// had read.
	Name string
	// Partitions are the partitions (orgs) whose streams are moved, besides
	// every partition this store has reserved in (checked every few
	// seconds: an org added by a config reload is moved once it is used).
	Partitions []string
	// Batch is how many entries one sink call takes at most (default 256).
	Batch int64
	// Block is how long one read waits for new entries (default 1 s).
	Block time.Duration
	// ClaimIdle is how long an entry another consumer read stays unstored
	// before this one takes it over (default 30 s): that consumer died.
	ClaimIdle time.Duration
	// ForgetAfter is how long a consumer holding nothing stays in the
	// group without reading before it is removed (default 1 h): an
	// instance that was replaced.
	ForgetAfter time.Duration
	// Log receives failures; nil discards.
	Log *slog.Logger
	// Stored, if set, is told how many entries each sink call stored.
	Stored func(n int)
}

// ConsumeLedger moves the ledger streams of opts.Partitions to sink until
// ctx is done: read (as a member of a consumer group), store, then
// acknowledge and delete. An entry is deleted only once sink took it, so a
// sink or Redis outage delays the ledger and loses nothing; an entry read
// by an instance that died is claimed by another after ClaimIdle.
func (s *Store) ConsumeLedger(ctx context.Context, sink LedgerSink, opts ConsumerOptions) {
	if opts.Group == "" {
		opts.Group = "tollgate-ledger"
	}
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	if opts.Block <= 0 {
		opts.Block = time.Second
	}
	if opts.ClaimIdle <= 0 {
		opts.ClaimIdle = 30 * time.Second
	}
	if opts.ForgetAfter <= 0 {
		opts.ForgetAfter = time.Hour
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[string]bool{}
	start := func(p string) {
		if running[p] {
			return
		}
		running[p] = true
		c := &consumer{s: s, sink: sink, opts: opts, stream: s.LedgerStream(p)}
		wg.Go(func() { c.run(ctx) })
	}
	for _, p := range opts.Partitions {
		start(p)
	}
	t := time.NewTicker(partitionCheck)
	defer t.Stop()
	for {
		for _, p := range s.KnownPartitions() {
			start(p)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// partitionCheck is how often ConsumeLedger looks for new partitions.
const partitionCheck = 2 * time.Second

// KnownPartitions are the partitions this store was configured with or
// has reserved in: those whose ledger streams it knows of.
func (s *Store) KnownPartitions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.partitions))
	for p := range s.partitions {
		out = append(out, p)
	}
	return out
}

// consumer moves one stream.
type consumer struct {
	s      *Store
	sink   LedgerSink
	opts   ConsumerOptions
	stream string
	// grouped: the consumer group is known to exist (until an error: Redis
	// may have lost it).
	grouped   bool
	lastClaim time.Time
}

func (c *consumer) run(ctx context.Context) {
	rdb, ok := c.s.rdb.(redis.Cmdable)
	if !ok {
		c.opts.Log.Error("ledger: the Redis client cannot read streams")
		return
	}
	var backoff backoff
	// What was read is stored and acknowledged even when ctx ends
	// meanwhile (shutdown): entries left read and unstored would wait
	// ClaimIdle for another instance. A read ends within Block; a store
	// within shutdownStore.
	work := context.WithoutCancel(ctx)
	// "0": first what this consumer read before and never stored (it was
	// restarted); ">" once that is done: new entries.
	from := "0"
	for ctx.Err() == nil {
		msgs, err := c.read(work, rdb, from)
		if err == nil && len(msgs) > 0 {
			sctx, cancel := context.WithTimeout(work, shutdownStore)
			err = c.store(sctx, rdb, msgs)
			cancel()
		}
		switch {
		case ctx.Err() != nil:
			if err != nil {
				c.opts.Log.Warn("ledger: entries read at shutdown could not be stored; another instance takes them over", "stream", c.stream, "after", c.opts.ClaimIdle, "err", err)
			}
			return
		case err != nil:
			c.opts.Log.Warn("ledger: moving the stream", "stream", c.stream, "err", err)
			backoff.wait(ctx)
			from = "0" // what was read and not stored is this consumer's to retry
			c.grouped = false
			continue
		case from == "0" && len(msgs) == 0:
			from = ">"
		}
		backoff.reset()
	}
}

// shutdownStore bounds the storing of entries read when shutdown began.
const shutdownStore = 5 * time.Second

// read returns the next entries to store: those of a dead consumer, every
// ClaimIdle, else this consumer's own (from "0") or new ones (">").
func (c *consumer) read(ctx context.Context, rdb redis.Cmdable, from string) ([]redis.XMessage, error) {
	if !c.grouped {
		if err := rdb.XGroupCreateMkStream(ctx, c.stream, c.opts.Group, "0").Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return nil, err
		}
		c.grouped = true
	}
	if time.Since(c.lastClaim) >= c.opts.ClaimIdle {
		msgs, _, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: c.stream, Group: c.opts.Group, Consumer: c.opts.Name,
			MinIdle: c.opts.ClaimIdle, Start: "0-0", Count: c.opts.Batch}).Result()
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			return msgs, nil // claim again next round: there may be more
		}
		c.lastClaim = time.Now()
		c.forgetGone(ctx, rdb)
	}
	block := c.opts.Block
	if from == "0" {
		block = -1 // no BLOCK: pending entries are there or not
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: c.opts.Group, Consumer: c.opts.Name,
		Streams: []string{c.stream, from}, Count: c.opts.Batch, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

// forgetGone removes from the group the consumers that hold nothing and
// have not read for ForgetAfter: every restarted instance with a new name
// would otherwise stay listed for good.
func (c *consumer) forgetGone(ctx context.Context, rdb redis.Cmdable) {
	consumers, err := rdb.XInfoConsumers(ctx, c.stream, c.opts.Group).Result()
	if err != nil {
		return
	}
	for _, x := range consumers {
		if x.Name != c.opts.Name && x.Pending == 0 && x.Idle >= c.opts.ForgetAfter {
			rdb.XGroupDelConsumer(ctx, c.stream, c.opts.Group, x.Name)
		}
	}
}

// store hands msgs to the sink, then acknowledges and deletes them.
func (c *consumer) store(ctx context.Context, rdb redis.Cmdable, msgs []redis.XMessage) error {
	entries := make([]budget.Entry, 0, len(msgs))
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
		e, err := decodeLedger(m)
		if err != nil {
			// Only a bug writes such an entry; keep its text in the log,
			// where an operator can put it back.
			c.opts.Log.Error("ledger: an unreadable stream entry", "stream", c.stream, "id", m.ID, "values", m.Values, "err", err)
			continue
		}
		entries = append(entries, e)
	}
	if err := c.sink(ctx, entries); err != nil {
		return err
	}
	if c.opts.Stored != nil {
		c.opts.Stored(len(entries))
	}
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, c.stream, c.opts.Group, ids...)
		p.XDel(ctx, c.stream, ids...)
		return nil
	})
	// If this fails the entries are stored and still pending: the next
	// delivery finds them stored already.
	return err
}

// decodeLedger reads one stream entry: the entry the gateway wrote ("r")
// and how it was resolved ("o").
func decodeLedger(m redis.XMessage) (budget.Entry, error) {
	var e budget.Entry
	raw, _ := m.Values["r"].(string)
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return e, err
	}
	switch o, _ := m.Values["o"].(string); o {
	case "1", "4":
		e.Outcome = budget.Settled.String()
	case "3":
		// The lease expired and the sweeper charged the reservation in
		// full; the entry is the one made at reservation.
		e.Outcome, e.Cost, e.Usage.Estimated = budget.Expired.String(), e.Reserved, true
	case "5":
		// A late settlement corrected the sweep's charge: the ledger,
		// which has the expired entry, gets the difference.
		e = budget.CorrectionOf(e)
	default:
		return e, errors.New("unknown outcome " + o)
	}
	if e.ID() == "req-" {
		return e, errors.New("no id")
	}
	return e, nil
}

// backoff waits longer after each failure, up to 5 s.
type backoff struct{ d time.Duration }

func (b *backoff) reset() { b.d = 0 }

func (b *backoff) wait(ctx context.Context) {
	b.d = min(max(2*b.d, 50*time.Millisecond), 5*time.Second)
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// LedgerStream is the key of partition's ledger stream.
func (s *Store) LedgerStream(partition string) string { return s.tag(partition) + "ledger" }

// LedgerBacklog returns the entries in partition's ledger stream: settled,
// not yet moved to the durable ledger (some may be there already, not yet
// acknowledged; the entry id tells). Unreadable entries are skipped.
func (s *Store) LedgerBacklog(ctx context.Context, partition string) ([]budget.Entry, error) {
	rdb, ok := s.rdb.(redis.Cmdable)
	if !ok {
		return nil, errors.New("redisstore: the Redis client cannot read streams")
	}
	var out []budget.Entry
	for start := "-"; ; {
		msgs, err := rdb.XRangeN(ctx, s.LedgerStream(partition), start, "+", 1000).Result()
		if err != nil {
			return nil, unavailable("reading the ledger stream", err)
		}
		for _, m := range msgs {
			if e, err := decodeLedger(m); err == nil {
				out = append(out, e)
			}
		}
		if len(msgs) < 1000 {
			return out, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}
