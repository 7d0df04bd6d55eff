package gateway

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// An exchange is the context one upstream attempt runs under: the
// client's values; ended when the attempt is past its target's timeout,
// when the answer's headers have not come within the first-byte timeout,
// when its stream has been quiet past the idle timeout, when the gateway
// shuts down past its drain budget, or when the gateway cuts it (it has
// what it wanted, or a stream passed its output bound). Ending it ends the
// transport's own context made from it, which aborts the request or the
// read of its answer.
//
// The client leaving does not end it: a request that reached the upstream
// is billed there whether anyone waits for the answer, so the answer is
// read to its usage all the same (forwarded means charged). Its cause
// says why an exchange ended before its answer did, for the ledger.
//
// context.WithTimeout(client's context) stood here: a timer and a child
// registered with the client's context per attempt, and the transport's
// child registered in a map of ours — some 5,000 instructions a request,
// more than the budget's whole reservation. An exchange registers with no
// context: one watchdog per gateway looks at the live exchanges a few
// times a second and ends those whose client left, whose deadline passed
// or whose stream went quiet; the transport's context finds it through
// AfterFunc (context's afterFuncer), without a map or a goroutine. The
// first-byte timeout was the transport's ResponseHeaderTimeout: a timer
// and a second turn of the transport's select per request, some 2,000
// instructions; the watchdog keeps it for nothing.
type exchange struct {
	w        *watchdog // watching it
	parent   context.Context
	done     chan struct{}
	deadline time.Time
	timeout  time.Duration
	// headersBy is when the answer's headers are due (zero: no such
	// limit); firstByte the wait it was set from. answered is set once
	// they came.
	headersBy time.Time
	firstByte time.Duration
	answered  atomic.Bool
	// idle is the longest quiet its stream may have (set when it
	// streams; 0: not watched for quiet); reads counts the stream's
	// reads that returned data.
	idle  atomic.Int64 // a time.Duration
	reads atomic.Int64
	body  countedReader // the answer, counted (stream)

	mu     sync.Mutex
	err    error    // how it ended; nil while it runs
	cause  string   // why, when not by the gateway's own cut (causes)
	afters []func() // contexts made from it, to end with it
	// afters0 is afters' room for the usual one (the transport's).
	afters0 [1]func()

	// The watchdog's: its place in the live list; whether it watches
	// the stream for quiet yet, the reads it saw last and when they
	// changed.
	prev, next *exchange
	watching   bool
	seen       int64
	seenAt     time.Time
}

var _ context.Context = (*exchange)(nil)

func (x *exchange) Deadline() (time.Time, bool) { return x.deadline, true }
func (x *exchange) Done() <-chan struct{}       { return x.done }
func (x *exchange) Value(key any) any           { return x.parent.Value(key) }

func (x *exchange) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// AfterFunc runs f when x ends; stop unregisters it (true if it did so
// before f ran). context.WithCancel and its kin call it for the contexts
// they make from x.
func (x *exchange) AfterFunc(f func()) (stop func() bool) {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	i := len(x.afters)
	x.afters = append(x.afters, f)
	x.mu.Unlock()
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.err != nil || x.afters[i] == nil {
			return false
		}
		x.afters[i] = nil
		return true
	}
}

// Why an exchange ended before its answer did (exchange.cause; "" for the
// gateway's own cut). The ledger names an attempt abandoned for them.
const (
	causeFirstByte = "first_byte_timeout"
	causeTimeout   = "timeout"
	causeIdle      = "idle_timeout"
	causeShutdown  = "shutdown"
)

// end ends x with err (the first end wins).
func (x *exchange) end(err error) { x.endFor(err, "") }

// endFor ends x with err, for cause.
func (x *exchange) endFor(err error, cause string) {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err, x.cause = err, cause
	close(x.done)
	afters := x.afters
	x.mu.Unlock()
	for _, f := range afters {
		if f != nil {
			f()
		}
	}
}

// cut ends x: the gateway has what it wanted of the exchange, or will
// take no more of it.
func (x *exchange) cut() { x.end(context.Canceled) }

// answer notes that the answer's headers came: the first-byte timeout
// no longer applies.
func (x *exchange) answer() { x.answered.Store(true) }

// why is the cause x ended for, if it ended for one.
func (x *exchange) why() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cause
}

// stream watches the reads of body, x's answer — a stream, or a whole
// answer, which can stall as well — for quiet longer than idle.
func (x *exchange) stream(body io.Reader, idle time.Duration) io.Reader {
	x.idle.Store(int64(idle))
	x.body = countedReader{r: body, x: x}
	return &x.body
}

// countedReader counts the reads of a stream that return data.
type countedReader struct {
	r io.Reader
	x *exchange
}

func (c *countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.x.reads.Add(1)
	}
	return n, err
}

// errQuiet ends an exchange whose stream went quiet past its idle
// timeout: a deadline, as the transport reports it.
var errQuiet = context.DeadlineExceeded

// A watchdog looks at the live exchanges of one gateway — every
// watchPeriod, or every eighth of the shortest timeout among them — and
// ends those whose deadline passed, whose answer's headers did not come in
// time, or whose stream had no data for its idle timeout. A stream is cut
// no sooner than its idle timeout after its last data, and some two looks
// after that; an exchange past a deadline, at the next look. Its goroutine
// runs while exchanges live.
type watchdog struct {
	now func() time.Time

	mu      sync.Mutex
	head    *exchange // the live list
	running bool
}

// watchPeriod is the longest between two looks.
const watchPeriod = 250 * time.Millisecond

// start makes and watches the exchange of an attempt under parent that
// may last timeout, its answer's headers due within firstByte (0: no
// limit but timeout).
func (w *watchdog) start(parent context.Context, timeout, firstByte time.Duration) *exchange {
	now := w.now()
	x := &exchange{w: w, parent: parent, done: make(chan struct{}), deadline: now.Add(timeout), timeout: timeout}
	x.afters = x.afters0[:0]
	if firstByte > 0 && firstByte < timeout {
		x.headersBy, x.firstByte = now.Add(firstByte), firstByte
	}
	w.mu.Lock()
	x.next = w.head
	if w.head != nil {
		w.head.prev = x
	}
	w.head = x
	run := !w.running
	w.running = true
	w.mu.Unlock()
	if run {
		go w.run()
	}
	return x
}

// release ends x and stops watching it.
func (x *exchange) release() {
	x.cut()
	w := x.w
	w.mu.Lock()
	if x.prev != nil {
		x.prev.next = x.next
	} else if w.head == x {
		w.head = x.next
	}
	if x.next != nil {
		x.next.prev = x.prev
	}
	x.prev, x.next = nil, nil
	w.mu.Unlock()
}

func (w *watchdog) run() {
	t := time.NewTimer(watchPeriod)
	defer t.Stop()
	for {
		period, more := w.look()
		if !more {
			return
		}
		t.Reset(period)
		<-t.C
	}
}

// look ends the exchanges due; it returns how long to wait for the next
// look, and whether any exchange is left to watch (if not, the watchdog's
// goroutine ends: the next start begins another).
func (w *watchdog) look() (period time.Duration, more bool) {
	now := w.now()
	period = watchPeriod
	var due []ending
	w.mu.Lock()
	if w.head == nil {
		w.running = false
		w.mu.Unlock()
		return 0, false
	}
	for x := w.head; x != nil; x = x.next {
		period = min(period, x.timeout/8)
		var err error
		cause := ""
		if !now.Before(x.deadline) {
			err, cause = context.DeadlineExceeded, causeTimeout
		}
		if x.firstByte > 0 && !x.answered.Load() {
			period = min(period, x.firstByte/8)
			if err == nil && !now.Before(x.headersBy) {
				err, cause = context.DeadlineExceeded, causeFirstByte
			}
		}
		if idle := time.Duration(x.idle.Load()); idle > 0 {
			period = min(period, idle/8)
			switch n := x.reads.Load(); {
			case !x.watching || n != x.seen:
				x.watching, x.seen, x.seenAt = true, n, now
			case err == nil && now.Sub(x.seenAt) >= idle:
				err, cause = errQuiet, causeIdle
			}
		}
		if err != nil {
			due = append(due, ending{x, err, cause})
		}
	}
	w.mu.Unlock()
	for _, d := range due {
		d.x.endFor(d.err, d.cause)
	}
	return max(period, time.Millisecond), true
}

type ending struct {
	x     *exchange
	err   error
	cause string
}

// endAll ends every live exchange for cause: the gateway stops listening
// to its upstreams (a shutdown past its drain budget). It returns how many
// it ended.
func (w *watchdog) endAll(cause string) int {
	var live []*exchange
	w.mu.Lock()
	for x := w.head; x != nil; x = x.next {
		live = append(live, x)
	}
	w.mu.Unlock()
	for _, x := range live {
		x.endFor(context.Canceled, cause)
	}
	return len(live)
}
