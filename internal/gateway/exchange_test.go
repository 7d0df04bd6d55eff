package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestExchangeStreamQuiet: a stream whose reads come closer together than
// the idle timeout is never cut, however long it lasts; one that goes
// quiet is cut no sooner than the timeout after its last data, and soon
// after it, as a deadline the exchange reports as its stream's quiet.
func TestExchangeStreamQuiet(t *testing.T) {
	const d = 100 * time.Millisecond
	w := &watchdog{now: time.Now}
	x := w.start(context.Background(), time.Hour, 0)
	defer x.release()
	pr, pw := io.Pipe()
	body := x.stream(pr, d)
	cut := make(chan time.Time, 1)
	context.AfterFunc(x, func() { cut <- time.Now(); pr.CloseWithError(io.ErrClosedPipe) })

	var lastRead atomic.Int64
	readDone := make(chan struct{})
	var maxGap time.Duration
	go func() {
		defer close(readDone)
		buf := make([]byte, 16)
		prev := time.Now()
		for {
			if _, err := body.Read(buf); err != nil {
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
	if x.why() != causeIdle || !errors.Is(x.Err(), context.DeadlineExceeded) {
		t.Fatalf("after the cut: cause %q, Err %v", x.why(), x.Err())
	}
	if gap := at.Sub(time.Unix(0, lastRead.Load())); gap < d {
		t.Fatalf("cut %v after the last data, before the %v timeout", gap, d)
	}
	if maxGap >= d {
		t.Logf("the reads were %v apart at most (a loaded machine): the flowing part proved nothing", maxGap)
	}
}

// TestExchangeEnds: an exchange ends at its deadline (DeadlineExceeded,
// for its timeout), at its first-byte deadline without headers, when the
// gateway ends them all (its shutdown) and when it is released or cut
// (Canceled, for no cause); not when its client leaves (the upstream
// bills the answer all the same). Released, it leaves the watchdog, whose
// goroutine ends once none is left. A stream not yet read past the
// exchange's start is not quiet for the time before it streamed.
func TestExchangeEnds(t *testing.T) {
	w := &watchdog{now: time.Now}
	wait := func(x *exchange, what string) {
		t.Helper()
		select {
		case <-x.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the exchange did not end", what)
		}
	}

	late := w.start(context.Background(), 30*time.Millisecond, 0)
	wait(late, "past its deadline")
	if !errors.Is(late.Err(), context.DeadlineExceeded) || late.why() != causeTimeout {
		t.Fatalf("past its deadline: Err %v, cause %q", late.Err(), late.why())
	}

	// The answer's headers due within 30 ms: an exchange without them
	// ends; one whose headers came does not. (The second is newer, first
	// in the watchdog's list: were it due, it would end first.)
	headless := w.start(context.Background(), time.Hour, 30*time.Millisecond)
	answered := w.start(context.Background(), time.Hour, 30*time.Millisecond)
	answered.answer()
	wait(headless, "no headers within the first-byte timeout")
	if !errors.Is(headless.Err(), context.DeadlineExceeded) || headless.why() != causeFirstByte {
		t.Fatalf("no headers in time: Err %v, cause %q", headless.Err(), headless.why())
	}
	if err := answered.Err(); err != nil {
		t.Fatalf("an exchange whose headers came ended at the first-byte deadline: %v", err)
	}

	client, leave := context.WithCancel(context.Background())
	left := w.start(client, time.Hour, 0)
	leave()
	w.look()
	if err := left.Err(); err != nil {
		t.Fatalf("an exchange ended when its client left: %v", err)
	}
	if w.endAll(causeShutdown) == 0 {
		t.Fatal("endAll ended no exchange")
	}
	wait(left, "the gateway ended them all")
	if !errors.Is(left.Err(), context.Canceled) || left.why() != causeShutdown {
		t.Fatalf("ended by endAll: Err %v, cause %q", left.Err(), left.why())
	}

	// Headers after a while, then a stream: the wait for the headers is
	// not quiet. (The exchanges above, ended but not released, keep the
	// looks 4 ms apart.)
	slow := w.start(context.Background(), time.Hour, 0)
	time.Sleep(1200 * time.Millisecond)
	began := time.Now()
	slow.stream(eofReader{}, time.Second)
	time.Sleep(100 * time.Millisecond) // some 25 looks
	if err := slow.Err(); err != nil && time.Since(began) < time.Second {
		t.Fatalf("a stream cut %v after it began (idle timeout 1 s): %v", time.Since(began), err)
	}
	slow.cut()
	if !errors.Is(slow.Err(), context.Canceled) || slow.why() != "" {
		t.Fatalf("cut: Err %v, cause %q", slow.Err(), slow.why())
	}

	for _, x := range []*exchange{late, headless, answered, left, slow} {
		x.release()
	}
	w.mu.Lock()
	head := w.head
	w.mu.Unlock()
	if head != nil {
		t.Fatal("released exchanges are still watched")
	}
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if !running {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the watchdog kept running with nothing to watch")
		}
	}
}

// TestExchangeChildren: contexts made from an exchange register with it
// (no goroutine, no map) and end with it; one ended first unregisters; one
// made from an ended exchange is ended at once.
func TestExchangeChildren(t *testing.T) {
	w := &watchdog{now: time.Now}
	x := w.start(context.Background(), time.Hour, 0)
	defer x.release()
	a, cancelA := context.WithCancelCause(x)
	b, cancelB := context.WithCancel(x)
	defer cancelB()
	if len(x.afters) != 2 {
		t.Fatalf("%d contexts registered with the exchange, want 2", len(x.afters))
	}
	cancelA(errors.New("done with it"))
	if x.afters[0] != nil {
		t.Fatal("a child ended first is still registered")
	}
	x.cut()
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a child outlived its exchange")
	}
	if !errors.Is(b.Err(), context.Canceled) || context.Cause(a).Error() != "done with it" {
		t.Fatalf("children: %v, %v", b.Err(), context.Cause(a))
	}
	c, cancelC := context.WithCancel(x)
	defer cancelC()
	select {
	case <-c.Done():
	default:
		t.Fatal("a child of an ended exchange runs")
	}
}

// TestExchangeAbortsTheTransport: ending an exchange aborts an HTTP
// request waiting for its headers, and the read of an answer's body.
func TestExchangeAbortsTheTransport(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			rw.WriteHeader(200)
			rw.(http.Flusher).Flush()
		}
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	w := &watchdog{now: time.Now}
	for _, path := range []string{"/headers", "/body"} {
		x := w.start(context.Background(), time.Hour, 0)
		req, _ := http.NewRequestWithContext(x, http.MethodGet, srv.URL+path, nil)
		headers, done := make(chan struct{}), make(chan error, 1)
		go func() {
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err == nil {
				close(headers)
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			done <- err
		}()
		<-entered // the server holds the request
		if path == "/body" {
			select { // and the client reads the body
			case <-headers:
			case err := <-done:
				t.Fatalf("/body: no answer: %v", err)
			}
		}
		x.release()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s: the exchange ended, the request did not fail", path)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the exchange ended, the request went on", path)
		}
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
