package simulated

import (
	"testing"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// A reply of n words must be exactly n tokens, or the usage the simulated
// upstream reports would not be honest.
func TestReplyWordsAreOneTokenEach(t *testing.T) {
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		c, err := tokenizer.Load(enc)
		if err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(20) {
			for _, n := range []int64{1, 7, 50, 333} {
				if got := c.Count(reply(seed, n)); got != n {
					t.Fatalf("%s: reply(%d, %d) is %d tokens", enc, seed, n, got)
				}
			}
		}
	}
}
