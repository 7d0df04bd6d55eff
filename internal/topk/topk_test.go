package topk_test

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/topk"
)

// Property: against exact counts of random streams, every key counted more
// than n/k times is kept, each kept count is within its overcount bound of
// the truth, and no count is below the truth.
func TestSpaceSavingBounds(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		k := 1 + rng.IntN(20)
		s := topk.New(k)
		exact := map[string]int64{}
		n := rng.IntN(3000)
		keys := 1 + rng.IntN(200)
		for range n {
			// Skewed: a few heavy keys among many light ones.
			key := "k" + strconv.Itoa(int(float64(keys)*rng.Float64()*rng.Float64()))
			s.Add(key)
			exact[key]++
		}
		top := s.Top(k)
		kept := map[string]topk.Entry{}
		for _, e := range top {
			kept[e.Key] = e
			if e.Count < exact[e.Key] || e.Count-e.Err > exact[e.Key] {
				t.Fatalf("seed %d: %s counted %d (overcount ≤ %d), truly %d", seed, e.Key, e.Count, e.Err, exact[e.Key])
			}
		}
		for key, c := range exact {
			if c > int64(n)/int64(k) {
				if _, ok := kept[key]; !ok {
					t.Fatalf("seed %d: %s seen %d > %d/%d times was dropped", seed, key, c, n, k)
				}
			}
		}
		if s.Total() != int64(n) || len(top) > k {
			t.Fatalf("seed %d: total %d, %d kept", seed, s.Total(), len(top))
		}
		for i := 1; i < len(top); i++ {
			if top[i].Count > top[i-1].Count {
				t.Fatalf("seed %d: not sorted: %v", seed, top)
			}
		}
	}
}

// A credential-stuffing run of a million distinct key ids does not push
// out the key that is refused steadily, and memory stays at k entries.
func TestSteadyKeySurvivesAFloodOfOneOffs(t *testing.T) {
	s := topk.New(10)
	for i := range 100_000 {
		s.Add("stuffing-" + strconv.Itoa(i))
		if i%5 == 0 {
			s.Add("acme/batch-job")
		}
	}
	top := s.Top(3)
	if len(top) == 0 || top[0].Key != "acme/batch-job" || top[0].Count-top[0].Err > 20_000 || top[0].Count < 20_000 {
		t.Fatalf("top %+v", top)
	}
	if n := len(s.Top(1000)); n != 10 {
		t.Fatalf("%d entries kept, want 10", n)
	}
}

func TestConcurrentAdds(t *testing.T) {
	s := topk.New(4)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				s.Add(strconv.Itoa((g + i) % 3))
			}
		})
	}
	wg.Wait()
	var sum int64
	for _, e := range s.Top(4) {
		sum += e.Count
	}
	if sum != 8000 || s.Total() != 8000 {
		t.Fatalf("sum %d, total %d", sum, s.Total())
	}
}
