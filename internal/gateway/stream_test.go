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

// streamText is a stream's output as a meter holds it: text read so far,
// and chunks held unread whose text TextBound bounds loosely (slack bytes
// a chunk over its text, as a chunk's bytes past its head do).
type streamText struct {
	text    string
	pending []string
	slack   int
	reads   int
}

func (s *streamText) add(chunk string) { s.pending = append(s.pending, chunk) }

func (s *streamText) TextBound() int {
	n := len(s.text)
	for _, p := range s.pending {
		n += len(p) + s.slack
	}
	return n
}

func (s *streamText) Text() string {
	if len(s.pending) > 0 {
		s.reads++
		s.text += strings.Join(s.pending, "")
		s.pending = s.pending[:0]
	}
	return s.text
}

func (s *streamText) Truncated() bool { return false }

// The stream is cut at the chunk where its output passes the bound, as
// when every chunk is counted the moment it passes, however loosely the
// unread text is bounded; and a stream that stays within its bound is
// counted only near it. Chunks are words with their leading space, which
// the tokenizer splits on, so a text counts the same in pieces as whole.
func TestOutputCountCutsWhereEveryChunkCountedWould(t *testing.T) {
	counter, err := tokenizer.Load("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	words := []string{" the", " a", " Hamlet", " unimaginable", " 42", " über", " 你好", " ...", " x"}
	rng := rand.New(rand.NewPCG(1, 2))
	fewer, reads := 0, 0
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
		m := &streamText{slack: max(0, rng.IntN(60)-20)} // a third exact
		// The gateway's count before: once the unread text could reach
		// the bound, every chunk read and counted as it passes.
		before := 0
		for i, bound0 := 0, 0; i < len(chunks) && (want < 0 || i <= want); i++ {
			if bound0 += len(chunks[i]) + m.slack; bound0 >= int(bound) {
				before++
			}
		}
		reads += before
		o := outputCount{counter: counter, bound: bound}
		got := -1
		for i, c := range chunks {
			m.add(c)
			if o.over(m) {
				got = i
				break
			}
		}
		if got != want {
			t.Fatalf("trial %d (bound %d, slack %d): cut at chunk %d, counting every chunk cuts at %d", trial, bound, m.slack, got, want)
		}
		if m.reads > before {
			t.Fatalf("trial %d: the text was read %d times, more than the %d of reading every chunk near the bound", trial, m.reads, before)
		}
		fewer += m.reads
	}
	if fewer*10 > reads*8 {
		t.Fatalf("the text was read %d times, counting every chunk near the bound %d: not a fifth fewer", fewer, reads)
	}
	t.Logf("the text was read %d times, counting every chunk near the bound %d", fewer, reads)
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
