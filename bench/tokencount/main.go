// Command tokencount measures a cold count of a large fresh prompt, side
// by side in one run: tiktoken-go's EncodeOrdinary (the reference), the
// gateway's counter with its piece cache empty (cold), with the pieces of
// other texts cached (a running gateway), and a repeat of the same text
// (the message cache). Rounds interleave the contenders, each round on a
// text no earlier round counted.
//
//	go run ./bench/tokencount -rounds 7
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

func main() {
	rounds := flag.Int("rounds", 7, "rounds, each on a fresh text")
	size := flag.Int("bytes", 520_000, "bytes per text (about 130k tokens of code and prose)")
	encoding := flag.String("encoding", "o200k_base", "o200k_base or cl100k_base")
	flag.Parse()
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	ref, err := tiktoken.GetEncoding(*encoding)
	if err != nil {
		panic(err)
	}
	corpus := sources()
	rng := rand.New(rand.NewPCG(11, 12))
	var tRef, tCold, tWarm, tCached []time.Duration
	for r := range *rounds {
		// A fresh text: the corpus's files in a new order, each round's
		// own words mixed in, so no cache has seen it whole.
		text := fresh(corpus, *size, rng, r)
		start := time.Now()
		want := len(ref.EncodeOrdinary(text))
		tRef = append(tRef, time.Since(start))

		cold := tokenizer.NewUncached(*encoding)
		start = time.Now()
		got := cold.CountUncached(text)
		tCold = append(tCold, time.Since(start))

		warm := tokenizer.NewUncached(*encoding)
		warm.CountUncached(fresh(corpus, *size, rng, r+1000)) // another text's pieces
		start = time.Now()
		got2 := warm.CountUncached(text)
		tWarm = append(tWarm, time.Since(start))

		c, _ := tokenizer.Load(*encoding)
		c.Count(text)
		start = time.Now()
		got3 := c.Count(text)
		tCached = append(tCached, time.Since(start))
		if int64(want) != got || got != got2 || got3 != got {
			fmt.Fprintf(os.Stderr, "round %d: counts differ: tiktoken-go %d, cold %d, warm %d, cached %d\n", r, want, got, got2, got3)
			os.Exit(1)
		}
		fmt.Printf("round %d: %d bytes, %d tokens: tiktoken-go %v, cold %v, warm %v, cached %v\n", r, len(text), want, tRef[r], tCold[r], tWarm[r], tCached[r])
	}
	med := func(d []time.Duration) time.Duration { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
	fmt.Printf("median: tiktoken-go %v; cold %v (%.3f×); warm pieces %v (%.3f×); cached %v\n",
		med(tRef), med(tCold), float64(med(tCold))/float64(med(tRef)), med(tWarm), float64(med(tWarm))/float64(med(tRef)), med(tCached))
}

// sources are the repository's Go and Markdown files.
func sources() []string {
	var out []string
	_ = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".md") {
			if b, err := os.ReadFile(p); err == nil {
				out = append(out, string(b))
			}
		}
		return nil
	})
	return out
}

// words are mixed into each text: prose, CJK, numbers.
var words = []string{"budget", "ceiling", "reservation", "settlement", "予算", "上限", "예산", "бюджет", "Überschreitung", "42", "3.14159", "🚀", "don't", "THEY'RE"}

func fresh(corpus []string, size int, rng *rand.Rand, round int) string {
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(corpus[rng.IntN(len(corpus))])
		for range 20 {
			fmt.Fprintf(&b, " %s%d", words[rng.IntN(len(words))], rng.IntN(1_000_000)+round)
		}
		b.WriteByte('\n')
	}
	return b.String()[:size]
}
