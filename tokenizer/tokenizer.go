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
	enc   *tiktoken.Tiktoken
	cache *countCache
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
	enc, err := tiktoken.GetEncoding(encoding)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: loading %q: %w", encoding, err)
	}
	c := &Counter{name: encoding, enc: enc, cache: newCountCache(defaultCacheEntries)}
	loaded[encoding] = c
	return c, nil
}

// Name returns the encoding's name.
func (c *Counter) Name() string { return c.name }

// Count returns the number of tokens in s. Special-token text such as
// "<|endoftext|>" is counted as ordinary text, as the API does for user input.
// Every count is cached by content hash: even a role name costs tiktoken-go
// a microsecond or more of regexp and BPE work, a cache hit about 100 ns.
func (c *Counter) Count(s string) int64 {
	if len(s) == 0 {
		return 0
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
		n = int64(len(c.enc.EncodeOrdinary(s)))
	}
	c.cache.put(h, n)
	return n
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

// Encode returns the tokens of s (for tests and the simulated upstream).
func (c *Counter) Encode(s string) []int { return c.enc.EncodeOrdinary(s) }

// Decode returns the text of tokens.
func (c *Counter) Decode(tokens []int) string { return c.enc.Decode(tokens) }
