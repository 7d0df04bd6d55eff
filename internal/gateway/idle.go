package gateway

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// idleReader cancels an upstream exchange whose stream goes quiet for
// longer than its idle timeout. A Read that returns data notes when; the
// timer is re-armed only when it fires, for what is left of the timeout
// after the last read. (Re-arming it at every read, as this did, was a
// timer-heap update per stream event: a tenth of the gateway's work on a
// stream.)
type idleReader struct {
	r      io.Reader
	d      time.Duration
	start  time.Time    // the clock the reads are noted on (monotonic)
	last   atomic.Int64 // when data last came: nanoseconds since start
	expire atomic.Bool
	cancel func()

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func newIdleReader(r io.Reader, d time.Duration, cancel func()) *idleReader {
	ir := &idleReader{r: r, d: d, start: time.Now(), cancel: cancel}
	ir.mu.Lock()
	ir.timer = time.AfterFunc(d, ir.check)
	ir.mu.Unlock()
	return ir
}

// check runs when the timer fires: the stream has been quiet for d since
// its last data, or it re-arms for the rest.
func (ir *idleReader) check() {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	if ir.stopped {
		return
	}
	if left := ir.d - (time.Since(ir.start) - time.Duration(ir.last.Load())); left > 0 {
		ir.timer.Reset(left)
		return
	}
	ir.expire.Store(true)
	ir.cancel()
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.last.Store(int64(time.Since(ir.start)))
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
