// Package tokenizer counts tokens the way OpenAI's models do: tiktoken BPE
// with ranks compiled into the binary (tiktoken-go-loader), so the process
// never fetches anything from the network. It owns the request shapes'
// counting rules (chat overhead, names, tools, images) and a cache of counts
// per message content, because agents resend whole conversations and BPE is
// the costliest step of a request's estimate.
//
// It must not import budget, upstream or any HTTP package.
package tokenizer

import (
	"fmt"
	"hash/maphash"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

func init() {
	// The default loader downloads ranks over HTTP; ours reads the copies
	// compiled into the binary.
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
}

// Encodings are the BPE encodings this build can count with.
var Encodings = []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"}

// Counter counts tokens with one encoding. It is safe for concurrent use.
type Counter struct {
	name  string
	fast  *fast // o200k_base and cl100k_base; nil: tiktoken-go counts
	cache *countCache
	// bpe, for a counter made by SplitDigits, is the encoding's own
	// counter, whose count this one adds the digits to; for one made by
	// Bytes, the counter it was made from.
	bpe *Counter
	// bytes: the count is the text's length in UTF-8 bytes (Bytes).
	bytes bool

	encOnce sync.Once
	enc     *tiktoken.Tiktoken // the reference: Encode, Decode, other encodings
	encErr  error
}

// rankFiles are where tiktoken's ranks are published; the offline loader
// maps each to its copy compiled into the binary.
var rankFiles = map[string]string{
	"o200k_base":  "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
	"cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}

var (
	loadMu  sync.Mutex
	loaded  = map[string]*Counter{}
	hashKey = maphash.MakeSeed()
)

// Load returns the counter for encoding, loading its ranks once per process.
// Loading o200k_base takes a few hundred milliseconds: do it at start-up.
func Load(encoding string) (*Counter, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if c, ok := loaded[encoding]; ok {
		return c, nil
	}
	c := &Counter{name: encoding, cache: newCountCache(defaultCacheEntries)}
	if file, ok := rankFiles[encoding]; ok {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(file)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: loading %q: %w", encoding, err)
		}
		c.fast = newFast(encoding, ranks)
	} else if _, err := c.reference(); err != nil {
		return nil, err
	}
	loaded[encoding] = c
	return c, nil
}

// SplitDigits returns the counter of c's encoding for a model whose
// tokenizer makes every digit a token of its own (Gemini's and Gemma's
// SentencePiece, Llama 2's, Mistral's): it counts each ASCII digit as one
// more token on top of the BPE count, which groups up to three digits in
// one. A run of n digits then counts at least n, as such a model bills
// it, however the rest of the text is scaled. It has its own cache.
func (c *Counter) SplitDigits() *Counter {
	if c.bpe != nil { // already split, or bytes, which count every digit
		return c
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	key := c.name + "+digits"
	if d, ok := loaded[key]; ok {
		return d
	}
	d := &Counter{name: key, cache: newCountCache(defaultCacheEntries), bpe: c}
	loaded[key] = d
	return d
}

// Bytes returns the counter for a model whose tokenizer is not public
// (Claude's, Gemini's, Llama's…): it counts a text as its length in UTF-8
// bytes. Every byte-level BPE or SentencePiece tokenizer with byte
// fallback makes each token of a text from one byte of it or more, so no
// such tokenizer counts more: the bound is a proof, where c's BPE count
// times a ratio is only a calibrated estimate. Estimate returns c, for
// what is counted to estimate rather than to bound.
func (c *Counter) Bytes() *Counter {
	if c.bytes {
		return c
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	key := c.name + "+bytes"
	if b, ok := loaded[key]; ok {
		return b
	}
	b := &Counter{name: key, bpe: c, bytes: true}
	loaded[key] = b
	return b
}

// Estimate returns the counter c was made from by Bytes, or c: a count
// close to the model's own, not a bound on it (streamed output counted
// where the upstream reported none, which is charged within the
// request's output bound anyway).
func (c *Counter) Estimate() *Counter {
	if c.bytes {
		return c.bpe
	}
	return c
}

// digits is how many ASCII digits s holds.
func digits(s string) int64 {
	n := int64(0)
	for i := 0; i < len(s); i++ {
		if s[i]-'0' <= 9 {
			n++
		}
	}
	return n
}

// reference is tiktoken-go's encoder of c's encoding, loaded on first use.
func (c *Counter) reference() (*tiktoken.Tiktoken, error) {
	if c.bpe != nil {
		return c.bpe.reference()
	}
	c.encOnce.Do(func() {
		c.enc, c.encErr = tiktoken.GetEncoding(c.name)
		if c.encErr != nil {
			c.encErr = fmt.Errorf("tokenizer: loading %q: %w", c.name, c.encErr)
		}
	})
	return c.enc, c.encErr
}

// Name returns the encoding's name.
func (c *Counter) Name() string { return c.name }

// Count returns the number of tokens in s. Special-token text such as
// "<|endoftext|>" is counted as ordinary text, as the API does for user input.
// Every count is cached by content hash: even a role name costs tiktoken-go
// a microsecond or more of regexp and BPE work, a cache hit about 100 ns.
func (c *Counter) Count(s string) int64 {
	if c.bytes || len(s) == 0 {
		return int64(len(s))
	}
	h := maphash.String(hashKey, s)
	if n, ok := c.cache.get(h); ok {
		return n
	}
	var n int64
	if longRun(s) {
		// BPE is quadratic in the length of one pre-token: 40,000 letters
		// in a row take seconds, a body of them hours. A token is at least
		// one byte, so the byte length bounds the count from above; only
		// text with such a run (an attack, or a blob no prose has) pays
		// for it with an over-estimate.
		n = int64(len(s))
	} else {
		n = c.count(s)
	}
	c.cache.put(h, n)
	return n
}

// count is s's token count, uncached.
func (c *Counter) count(s string) int64 {
	if c.bpe != nil {
		return c.bpe.Count(s) + digits(s)
	}
	if c.fast != nil {
		return c.fast.count(s)
	}
	return int64(len(c.enc.EncodeOrdinary(s)))
}

// maxRun is the longest run of one character class (letters, spaces, or
// symbols: what the pre-tokenizer keeps in one piece) counted with BPE.
// Pieces up to this long cost BPE about what ordinary prose does per byte.
const maxRun = 256

// longRun reports whether s has a run of more than maxRun bytes of letters
// (and marks), of white space, or of symbols (neither letters, digits nor
// space). Digits are split every three by every encoding's pre-tokenizer.
func longRun(s string) bool {
	if len(s) <= maxRun {
		return false
	}
	class, start := byte(0), 0
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		var k byte
		switch {
		case r < utf8.RuneSelf && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'):
			k = 'L'
		case r < utf8.RuneSelf && '0' <= r && r <= '9':
			k = 'N'
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			k = 'S'
		case r < utf8.RuneSelf:
			k = 'P'
		case unicode.IsLetter(r) || unicode.IsMark(r):
			k = 'L'
		case unicode.IsNumber(r):
			k = 'N'
		case unicode.IsSpace(r):
			k = 'S'
		default:
			k = 'P'
		}
		if k != class {
			class, start = k, i
		} else if k != 'N' && i+size-start > maxRun {
			return true
		}
		i += size
	}
	return false
}

// Encode returns the tokens of s by tiktoken-go, the reference (for tests
// and the simulated upstream).
func (c *Counter) Encode(s string) []int {
	enc, err := c.reference()
	if err != nil {
		panic(err) // the ranks are compiled in: only a broken build fails here
	}
	return enc.EncodeOrdinary(s)
}

// Decode returns the text of tokens.
func (c *Counter) Decode(tokens []int) string {
	enc, err := c.reference()
	if err != nil {
		panic(err)
	}
	return enc.Decode(tokens)
}

// Uncached is a counter with no count cache and an empty piece cache, for
// benchmarks of a cold count.
type Uncached struct{ f *fast }

// NewUncached returns a cold counter of encoding (o200k_base or
// cl100k_base).
func NewUncached(encoding string) Uncached {
	c, err := Load(encoding)
	if err != nil || c.fast == nil {
		panic(fmt.Sprintf("tokenizer: no fast counter for %q", encoding))
	}
	return Uncached{f: &fast{ranks: c.fast.ranks, next: c.fast.next, pieces: newPieceCache()}}
}

// CountUncached counts s from scratch.
func (u Uncached) CountUncached(s string) int64 { return u.f.count(s) }
