package e2e_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// A fault is where an exchange breaks: the client hangs up after some
// bytes of the answer (or before it), or the upstream stalls, breaks its
// connection or keeps its headers past the first-byte timeout. The
// upstream bills as providers do in every case: what it was sent, and
// what it generated, whoever stopped listening.
type fault struct {
	kind uint8 // faultNone, ...
	at   int   // bytes of the answer before it strikes
}

const (
	faultNone = iota
	faultClientLeaves
	faultClientLeavesEarly // before the answer's headers
	faultStall
	faultBreak
	faultLateHeaders
	faults
)

// faultyUpstream serves the simulated upstream through the fault set for
// the next request.
type faultyUpstream struct {
	sim    *simulated.Server
	next   atomic.Pointer[fault]
	active atomic.Int64 // requests being served (and billed)
}

// idle waits until no request is being served. (A WaitGroup would not do:
// a request may arrive while the test waits.)
func (u *faultyUpstream) idle() {
	testkit.WaitFor(5*time.Second, func() bool { return u.active.Load() == 0 })
}

func (u *faultyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.active.Add(1)
	defer u.active.Add(-1)
	f := u.next.Load()
	if f == nil {
		f = &fault{}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch f.kind {
	case faultLateHeaders, faultClientLeavesEarly:
		select {
		case <-time.After(80 * time.Millisecond):
		case <-r.Context().Done():
			// The provider works on it all the same; the answer goes
			// nowhere.
			u.sim.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
			return
		}
	case faultStall, faultBreak:
		w = &breakingWriter{ResponseWriter: w, left: f.at, stall: f.kind == faultStall, done: r.Context().Done()}
	}
	u.sim.ServeHTTP(w, r)
}

// breakingWriter passes an answer's first left bytes, then stalls until
// the client leaves, or breaks the connection.
type breakingWriter struct {
	http.ResponseWriter
	left  int
	stall bool
	done  <-chan struct{}
}

func (b *breakingWriter) Write(p []byte) (int, error) {
	if len(p) <= b.left {
		b.left -= len(p)
		return b.ResponseWriter.Write(p)
	}
	n, _ := b.ResponseWriter.Write(p[:b.left])
	b.left = 0
	if f, ok := b.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	if b.stall {
		<-b.done
		return n, io.ErrClosedPipe
	}
	panic(http.ErrAbortHandler) // the connection, cut
}

func (b *breakingWriter) Flush() {
	if f, ok := b.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// faultRig is the bound rig's gateway, served over real connections, in
// front of the faulty upstream, with short timeouts.
type faultRig struct {
	app     *app.App
	url     string
	up      *faultyUpstream
	mu      sync.Mutex
	entries []budget.Entry
}

func newFaultRig(t testing.TB) *faultRig {
	t.Helper()
	sim, err := simulated.New(simulated.Options{APIKey: "k", ChunkDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := &faultRig{up: &faultyUpstream{sim: sim}}
	up := httptest.NewServer(r.up)
	t.Cleanup(up.Close)
	// Short timeouts, and a breaker that never opens: every fault is
	// met by a request forwarded.
	src := strings.ReplaceAll(boundConfig, "api_key: k,", "api_key: k, first_byte_timeout: 50ms, idle_timeout: 100ms, breaker: {failures: 1000000},")
	a := apptest.New(t, src, map[string]string{"UPSTREAM": up.URL + "/v1", "KEY_HASH": policy.HashKey(testKey)})
	stop := a.Background(context.Background())
	gw := httptest.NewServer(a.Handler())
	t.Cleanup(func() { gw.Close(); stop(); a.Close() })
	a.Gateway().OnSettle(func(e budget.Entry) { r.mu.Lock(); r.entries = append(r.entries, e); r.mu.Unlock() })
	r.app, r.url = a, gw.URL
	return r
}

// check sends body to route under fault f and holds forwarded-means-charged:
// what the upstream billed for it is what the ledger recorded where the
// gateway learned the usage ("reported", "drained"), and at most the
// reservation the ledger recorded where it did not; a request never
// forwarded is neither billed nor charged.
func (r *faultRig) check(t testing.TB, route string, body []byte, f fault) (settlements []string) {
	t.Helper()
	before := r.up.sim.Stats().Usage
	r.mu.Lock()
	r.entries = r.entries[:0]
	r.mu.Unlock()
	r.up.next.Store(&f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if f.kind == faultClientLeavesEarly {
		ctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url+route, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	status := 0
	if resp, err := http.DefaultClient.Do(req); err == nil {
		status = resp.StatusCode
		if f.kind == faultClientLeaves {
			_, _ = io.CopyN(io.Discard, resp.Body, int64(f.at))
			cancel()
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		resp.Body.Close()
	}
	// The exchange may go on after the client is done with it (a drain,
	// an upstream billing an answer no one waits for): wait for the
	// upstream to be done, then for the ledger.
	r.up.idle()
	testkit.WaitFor(5*time.Second, func() bool {
		r.mu.Lock()
		n := len(r.entries)
		r.mu.Unlock()
		return r.app.Gateway().Settling() == 0 && (n > 0 || status >= 400 && status < 500 && status != 499)
	})
	r.up.idle()
	cost := billedSince(before, r.up.sim.Stats().Usage)
	r.mu.Lock()
	defer r.mu.Unlock()
	var recorded, reserved int64
	learned := true // every entry settled at reported usage
	for _, e := range r.entries {
		settlements = append(settlements, e.Settlement+"/"+e.Abandoned)

		recorded, reserved = recorded+int64(e.Cost), reserved+int64(e.Reserved)
		if e.Settlement != "reported" && e.Settlement != "drained" {
			learned = false
		}
		if e.Settlement == "reservation" && e.Cost != e.Reserved {
			t.Fatalf("%s %s (fault %+v): settled at the reservation, charged %v of %v", route, short(body), f, e.Cost, e.Reserved)
		}
	}
	switch {
	case cost > reserved:
		t.Fatalf("%s %s (fault %+v): the upstream billed %d µ$, the gateway reserved %d (%+v)", route, short(body), f, cost, reserved, r.entries)
	case cost > recorded:
		t.Fatalf("%s %s (fault %+v): the upstream billed %d µ$, the ledger recorded %d (%+v)", route, short(body), f, cost, recorded, r.entries)
	case learned && len(r.entries) > 0 && cost != recorded:
		t.Fatalf("%s %s (fault %+v): the upstream billed %d µ$, the ledger recorded %d from its usage (%+v)", route, short(body), f, cost, recorded, r.entries)
	}
	return settlements
}

// Every seed body, under every fault at a few points, and mutated: the
// ledger holds what the upstream billed.
func TestForwardedIsChargedUnderFaults(t *testing.T) {
	r := newFaultRig(t)
	rng := rand.New(rand.NewPCG(35, 36))
	n := 300
	if testing.Short() {
		n = 60
	}
	seen := map[string]int{}
	for i := range n {
		seed := seeds[i%len(seeds)]
		body := seed[1]
		if i >= 2*len(seeds) {
			body = mutate(rng, body)
		}
		for _, s := range r.check(t, seed[0], []byte(body), fault{kind: uint8(i/len(seeds)) % faults, at: rng.IntN(600)}) {
			seen[s]++
		}
	}
	// Each way of settling is met, or the faults prove little.
	for _, want := range []string{"reported/", "drained/", "reservation/first_byte_timeout", "reservation/idle_timeout", "reservation/"} {
		if seen[want] == 0 {
			t.Errorf("no request settled as %q: %v", want, seen)
		}
	}
	t.Logf("settled: %v", seen)
}

// FuzzForwardedIsCharged is the same under go test -fuzz: any body, any
// fault, anywhere.
func FuzzForwardedIsCharged(f *testing.F) {
	for i, s := range seeds {
		for k := range uint8(faults) {
			f.Add(uint8(slices.Index(boundRoutes, s[0])), []byte(s[1]), k, uint16(40*i))
		}
	}
	r := newFaultRig(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte, kind uint8, at uint16) {
		r.check(t, boundRoutes[int(route)%len(boundRoutes)], body, fault{kind: kind % faults, at: int(at % 4096)})
	})
}
