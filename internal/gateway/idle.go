package gateway

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// idleReader cancels an upstream exchange whose stream goes quiet for
// longer than its idle timeout. A Read that returns data counts itself;
// a timer looks at the count every eighth of the timeout, and the stream
// is cut once eight looks in a row found no new data: between the timeout
// and an eighth more after the last data, never sooner. (A Read noted its
// time before, and re-armed the timer earlier still: a clock read, then a
// timer-heap update, at every stream event.)
type idleReader struct {
	r      io.Reader
	reads  atomic.Int64 // reads that returned data
	expire atomic.Bool
	cancel func()

	mu      sync.Mutex
	timer   *time.Timer
	period  time.Duration // an eighth of the timeout, rounded up
	seen    int64         // reads at the last look
	quiet   int           // looks in a row that found no new data
	stopped bool
}

// idleLooks is how many looks a timeout is cut into.
const idleLooks = 8

func newIdleReader(r io.Reader, d time.Duration, cancel func()) *idleReader {
	ir := &idleReader{r: r, period: max((d+idleLooks-1)/idleLooks, 1), cancel: cancel}
	ir.mu.Lock()
	ir.timer = time.AfterFunc(ir.period, ir.look)
	ir.mu.Unlock()
	return ir
}

// look runs when the timer fires: a period with no new data adds to the
// quiet; idleLooks of them in a row, each at least a period long and all
// after the period of the last data, are the timeout.
func (ir *idleReader) look() {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	if ir.stopped {
		return
	}
	if n := ir.reads.Load(); n != ir.seen {
		ir.seen, ir.quiet = n, 0
	} else {
		ir.quiet++
	}
	if ir.quiet < idleLooks {
		ir.timer.Reset(ir.period)
		return
	}
	ir.expire.Store(true)
	ir.cancel()
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.reads.Add(1)
	}
	return n, err
}

func (ir *idleReader) stop() {
	ir.mu.Lock()
	ir.stopped = true
	ir.timer.Stop()
	ir.mu.Unlock()
}

func (ir *idleReader) fired() bool { return ir.expire.Load() }
