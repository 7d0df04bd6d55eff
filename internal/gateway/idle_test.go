package gateway

import (
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleReader: a stream whose reads come closer together than the idle
// timeout is never cut, however long it lasts; one that goes quiet is cut
// no sooner than the timeout after its last data, and soon after it.
func TestIdleReader(t *testing.T) {
	const d = 100 * time.Millisecond
	pr, pw := io.Pipe()
	cut := make(chan time.Time, 1)
	ir := newIdleReader(pr, d, func() { cut <- time.Now(); pr.CloseWithError(io.ErrClosedPipe) })
	defer ir.stop()

	var lastRead atomic.Int64
	readDone := make(chan struct{})
	var maxGap time.Duration
	go func() {
		defer close(readDone)
		buf := make([]byte, 16)
		prev := time.Now()
		for {
			if _, err := ir.Read(buf); err != nil {
				return
			}
			now := time.Now()
			maxGap = max(maxGap, now.Sub(prev))
			prev = now
			lastRead.Store(now.UnixNano())
		}
	}()
	// Data every 10 ms for five timeouts.
	for start := time.Now(); time.Since(start) < 5*d; {
		if _, err := pw.Write([]byte("data")); err != nil {
			<-readDone
			if maxGap < d {
				t.Fatalf("the stream was cut while it flowed (reads at most %v apart): %v", maxGap, err)
			}
			t.Logf("cut while flowing, after a %v gap (a loaded machine)", maxGap)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Then quiet: the cut comes.
	var at time.Time
	select {
	case at = <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("a quiet stream was never cut")
	}
	<-readDone
	if !ir.fired() {
		t.Fatal("fired() is false after the cut")
	}
	if gap := at.Sub(time.Unix(0, lastRead.Load())); gap < d {
		t.Fatalf("cut %v after the last data, before the %v timeout", gap, d)
	}
	if maxGap >= d {
		t.Logf("the reads were %v apart at most (a loaded machine): the flowing part proved nothing", maxGap)
	}
}

// TestIdleReaderStopped: a stopped reader never cuts.
func TestIdleReaderStopped(t *testing.T) {
	cut := make(chan struct{}, 1)
	ir := newIdleReader(eofReader{}, time.Millisecond, func() { cut <- struct{}{} })
	ir.stop()
	time.Sleep(20 * time.Millisecond) // time for a timer that was not stopped to fire
	select {
	case <-cut:
		t.Fatal("a stopped reader cut the stream")
	default:
	}
	if ir.fired() {
		t.Fatal("fired() after stop")
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
