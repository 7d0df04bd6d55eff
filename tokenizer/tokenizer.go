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
	n := int64(len(c.enc.EncodeOrdinary(s)))
	c.cache.put(h, n)
	return n
}

// Encode returns the tokens of s (for tests and the simulated upstream).
func (c *Counter) Encode(s string) []int { return c.enc.EncodeOrdinary(s) }

// Decode returns the text of tokens.
func (c *Counter) Decode(tokens []int) string { return c.enc.Decode(tokens) }
