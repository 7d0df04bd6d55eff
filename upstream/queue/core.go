// Package queue is the leaky-bucket queue in front of one upstream: a
// bounded number of requests wait, fairly across teams, and leave at a
// constant rate (requests per second and/or tokens per minute) and/or under
// a concurrency cap. Core is the pure scheduler and takes the time as an
// argument; Queue runs it on a clock.
package queue

import (
	"errors"
	"time"
)

// Expected outcomes.
var (
	// ErrFull: the queue is at its length; the request is refused at once.
	ErrFull = errors.New("queue: full")
	// ErrDeadline: the request waited its maximum without being admitted.
	ErrDeadline = errors.New("queue: wait deadline passed")
)

// Config is one upstream's queue. Zero values mean: no rate, no token rate,
// no concurrency cap (at least one should be set), MaxLength 100,
// MaxWait 30 s.
type Config struct {
	// MaxLength bounds the requests waiting (not those admitted).
	MaxLength int
	// Rate is the drain in requests per second.
	Rate float64
	// TokensPerMinute is the drain in estimated tokens per minute.
	TokensPerMinute int64
	// Concurrency bounds the requests admitted and not yet done.
	Concurrency int
	// MaxWait bounds one request's wait.
	MaxWait time.Duration
}

func (c *Config) setDefaults() {
	if c.MaxLength <= 0 {
		c.MaxLength = 100
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 30 * time.Second
	}
}

// Ticket is one waiting request.
type Ticket struct {
	team     string
	weight   int64
	deadline time.Time
	// admitted is set by Admit; ready is closed then (Queue's use).
	admitted bool
	removed  bool
	ready    chan struct{}
}

// Core schedules tickets. It is not safe for concurrent use; Queue holds a
// mutex around it.
type Core struct {
	cfg      Config
	fifos    map[string][]*Ticket
	ring     []string // teams with waiting tickets, in round-robin order
	next     int      // index in ring of the team served next
	nextFree time.Time
	inFlight int
	waiting  int
}

// NewCore returns a scheduler for cfg.
func NewCore(cfg Config) *Core {
	cfg.setDefaults()
	return &Core{cfg: cfg, fifos: map[string][]*Ticket{}}
}

// Len is the number of waiting tickets.
func (c *Core) Len() int { return c.waiting }

// InFlight is the number of admitted tickets not yet done.
func (c *Core) InFlight() int { return c.inFlight }

// Enqueue adds a request of team weighing weight tokens. A full queue
// refuses with ErrFull.
func (c *Core) Enqueue(now time.Time, team string, weight int64) (*Ticket, error) {
	if c.waiting >= c.cfg.MaxLength {
		return nil, ErrFull
	}
	t := &Ticket{team: team, weight: weight, deadline: now.Add(c.cfg.MaxWait), ready: make(chan struct{})}
	if len(c.fifos[team]) == 0 {
		// A team that starts waiting is served next: a flood cannot push
		// it back more than the slot already promised.
		c.ring = append(c.ring[:c.next:c.next], append([]string{team}, c.ring[c.next:]...)...)
	}
	c.fifos[team] = append(c.fifos[team], t)
	c.waiting++
	return t, nil
}

// Cancel removes a waiting ticket (its client went away or its deadline
// passed). It reports false if the ticket was already admitted.
func (c *Core) Cancel(t *Ticket) bool {
	if t.admitted || t.removed {
		return false
	}
	f := c.fifos[t.team]
	for i, x := range f {
		if x == t {
			c.fifos[t.team] = append(f[:i:i], f[i+1:]...)
			break
		}
	}
	t.removed = true
	c.waiting--
	if len(c.fifos[t.team]) == 0 {
		c.dropTeam(t.team)
	}
	return true
}

func (c *Core) dropTeam(team string) {
	delete(c.fifos, team)
	for i, x := range c.ring {
		if x == team {
			c.ring = append(c.ring[:i:i], c.ring[i+1:]...)
			if c.next > i {
				c.next--
			}
			break
		}
	}
	if c.next >= len(c.ring) {
		c.next = 0
	}
}

// Done records that an admitted request finished (for the concurrency cap).
func (c *Core) Done() {
	if c.inFlight > 0 {
		c.inFlight--
	}
}

// interval is how long the drain takes for one request of weight tokens.
func (c *Core) interval(weight int64) time.Duration {
	var d time.Duration
	if c.cfg.Rate > 0 {
		d = time.Duration(float64(time.Second) / c.cfg.Rate)
	}
	if c.cfg.TokensPerMinute > 0 {
		d = max(d, time.Duration(weight)*time.Minute/time.Duration(c.cfg.TokensPerMinute))
	}
	return d
}

// Admit lets waiting tickets go as the drain and the concurrency cap allow
// at now, serving teams in turn, and returns them. wake is when to call
// again (zero: when a ticket is enqueued or done).
func (c *Core) Admit(now time.Time) (admitted []*Ticket, wake time.Time) {
	for c.waiting > 0 {
		if c.cfg.Concurrency > 0 && c.inFlight >= c.cfg.Concurrency {
			return admitted, time.Time{}
		}
		if now.Before(c.nextFree) {
			return admitted, c.nextFree
		}
		team := c.ring[c.next]
		t := c.fifos[team][0]
		c.fifos[team] = c.fifos[team][1:]
		c.waiting--
		if len(c.fifos[team]) == 0 {
			c.dropTeam(team)
		} else {
			c.next = (c.next + 1) % len(c.ring)
		}
		t.admitted = true
		c.inFlight++
		// A leaky bucket drains at a constant rate: idle time is not
		// saved up for a burst.
		c.nextFree = later(c.nextFree, now).Add(c.interval(t.weight))
		admitted = append(admitted, t)
	}
	return admitted, time.Time{}
}

// RetryAfter estimates how long a refused request should wait: the time the
// drain needs for everyone waiting now.
func (c *Core) RetryAfter(now time.Time) time.Duration {
	d := time.Duration(c.waiting+1) * c.interval(0)
	if c.nextFree.After(now) {
		d += c.nextFree.Sub(now)
	}
	if d <= 0 {
		d = time.Second
	}
	return d
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
