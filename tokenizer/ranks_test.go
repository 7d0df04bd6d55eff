package tokenizer

import (
	"math/rand/v2"
	"testing"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// TestRankTableIsTheMap: every token of both files is found with its rank,
// and strings that are no token — a token with a byte more or less, random
// bytes — are not.
func TestRankTableIsTheMap(t *testing.T) {
	for enc, file := range rankFiles {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(file)
		if err != nil {
			t.Fatal(err)
		}
		tab := newRankTable(ranks)
		for tok, want := range ranks {
			if got, ok := tab.rank(tok); !ok || got != want {
				t.Fatalf("%s: rank(%q) = %d, %v; want %d", enc, tok, got, ok, want)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		misses := 0
		for tok := range ranks {
			for _, s := range []string{tok + "\x00\xff", tok[:len(tok)-1], string(rune(rng.IntN(0x10FFFF))) + tok} {
				_, inMap := ranks[s]
				got, ok := tab.rank(s)
				if ok != inMap || ok && got != ranks[s] {
					t.Fatalf("%s: rank(%q) = %d, %v; the map has it: %v", enc, s, got, ok, inMap)
				}
				if !ok {
					misses++
				}
			}
		}
		if misses == 0 {
			t.Fatalf("%s: no look-up missed", enc)
		}
	}
}
