package gateway

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/tokenizer"
)

// streamText is a stream's output as a meter keeps it: the text of the
// chunks so far.
type streamText struct{ text string }

func (s *streamText) add(chunk string) { s.text += chunk }
func (s *streamText) Text() string     { return s.text }
func (s *streamText) Truncated() bool  { return false }

// counting counts the calls to a counter.
type counting struct {
	counter interface{ Count(string) int64 }
	calls   int
}

func (c *counting) Count(s string) int64 { c.calls++; return c.counter.Count(s) }

// The stream is cut at the chunk where its output passes the bound, as
// when every chunk is counted the moment it passes; and a stream that
// stays within its bound is counted only near it. Chunks are words with
// their leading space, which the tokenizer splits on, so a text counts
// the same in pieces as whole.
func TestOutputCountCutsWhereEveryChunkCountedWould(t *testing.T) {
	counter, err := tokenizer.Load("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	words := []string{" the", " a", " Hamlet", " unimaginable", " 42", " über", " 你好", " ...", " x"}
	rng := rand.New(rand.NewPCG(1, 2))
	fewer, counts := 0, 0
	for trial := range 1000 {
		// Half the trials count a token a byte, the fewest bytes a token
		// can have: where the bound is tightest.
		var counter interface{ Count(string) int64 } = counter
		if trial%2 == 1 {
			counter = byteCounter{}
		}
		bound := int64(1 + rng.IntN(80))
		chunks := make([]string, 1+rng.IntN(120))
		for i := range chunks {
			var b strings.Builder
			for range 1 + rng.IntN(3) {
				b.WriteString(words[rng.IntN(len(words))])
			}
			chunks[i] = b.String()
		}
		// The reference: every chunk counted as it passes.
		want, total := -1, int64(0)
		for i, c := range chunks {
			if total += counter.Count(c); total > bound {
				want = i
				break
			}
		}
		// The gateway's count before: once the text could reach the
		// bound, every chunk counted as it passes.
		before := 0
		for i, n := 0, 0; i < len(chunks) && (want < 0 || i <= want); i++ {
			if n += len(chunks[i]); n >= int(bound) {
				before++
			}
		}
		counts += before
		c := &counting{counter: counter}
		o := outputCount{counter: c, bound: bound}
		m := &streamText{}
		got := -1
		for i, chunk := range chunks {
			m.add(chunk)
			if o.over(m) {
				got = i
				break
			}
		}
		if got != want {
			t.Fatalf("trial %d (bound %d): cut at chunk %d, counting every chunk cuts at %d", trial, bound, got, want)
		}
		if c.calls > before {
			t.Fatalf("trial %d: the text was counted %d times, more than the %d of counting every chunk near the bound", trial, c.calls, before)
		}
		fewer += c.calls
	}
	if fewer*10 > counts*8 {
		t.Fatalf("the text was counted %d times, counting every chunk near the bound %d: not a fifth fewer", fewer, counts)
	}
	t.Logf("the text was counted %d times, counting every chunk near the bound %d", fewer, counts)
}

// byteCounter counts a token a byte.
type byteCounter struct{}

func (byteCounter) Count(s string) int64 { return int64(len(s)) }

// The lease keeper reads the clock when a read's events are all handled,
// and at every 64th event of reads that never drain: a third of the lease
// past, either one renews it.
func TestLeaseKeeperLooksOnDrainAndEvery64Events(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	g := &Gateway{now: clock.Now}
	k := g.leaseKeeper(context.Background(), &Call{settings: &Settings{lease: 3 * time.Minute}})
	clock.Advance(2 * time.Minute)
	for i := 1; i < 64; i++ {
		if k.keep(false); !k.last.Equal(clock.Now().Add(-2 * time.Minute)) {
			t.Fatalf("event %d, the read not drained: the lease was looked at", i)
		}
	}
	if k.keep(false); !k.last.Equal(clock.Now()) {
		t.Fatal("the 64th event did not look at the lease")
	}
	clock.Advance(2 * time.Minute)
	if k.keep(true); !k.last.Equal(clock.Now()) {
		t.Fatal("a drained read did not look at the lease")
	}
}
