package gateway

import (
	"io"
	"sync/atomic"
	"time"
)

// idleReader cancels an upstream exchange whose stream goes quiet for
// longer than its idle timeout: each Read that returns re-arms the timer.
type idleReader struct {
	r      io.Reader
	d      time.Duration
	timer  *time.Timer
	expire atomic.Bool
}

func newIdleReader(r io.Reader, d time.Duration, cancel func()) *idleReader {
	ir := &idleReader{r: r, d: d}
	ir.timer = time.AfterFunc(d, func() {
		ir.expire.Store(true)
		cancel()
	})
	return ir
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.d)
	}
	return n, err
}

func (ir *idleReader) stop()       { ir.timer.Stop() }
func (ir *idleReader) fired() bool { return ir.expire.Load() }
