package simulated

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"time"
)

// Anthropic's prompt cache, as its documentation describes it: a request
// marks prefixes with cache_control breakpoints ({"type":"ephemeral"},
// ttl "5m" by default or "1h"); the prefix is tools, then system, then
// messages, up to and including the marked block. The longest marked
// prefix already cached is read (billed at a tenth of input); every
// segment after it up to a breakpoint is written with that breakpoint's
// TTL (billed at 1.25 × input for five minutes, 2 × for an hour); the rest
// of the prompt is plain input. A prefix shorter than claudeMinCache
// tokens is not cached. A read refreshes its entry's TTL.

// claudeMinCache is the shortest prefix Claude caches (Sonnet and Opus).
const claudeMinCache = 1024

// breakpoint is a marked prefix: its key, its length in Claude tokens and
// its TTL.
type breakpoint struct {
	key    [32]byte
	tokens int64
	ttl    time.Duration
}

// cacheUse is how a request's prompt was billed: read from the cache,
// written for five minutes and for an hour (the rest is plain input).
type cacheUse struct {
	read, write5m, write1h int64
}

func (c cacheUse) writes() int64 { return c.write5m + c.write1h }

// usage is the Anthropic usage of a prompt of prompt tokens and n output
// tokens, the cache's parts apart.
func (c cacheUse) usage(prompt, n int64) map[string]any {
	return map[string]any{"input_tokens": prompt - c.read - c.writes(), "output_tokens": n,
		"cache_creation_input_tokens": c.writes(), "cache_read_input_tokens": c.read,
		"cache_creation": map[string]any{"ephemeral_5m_input_tokens": c.write5m, "ephemeral_1h_input_tokens": c.write1h}}
}

// claudeBreakpoints lists req's marked prefixes in order, counted as
// claudePrompt counts (claudeTokens, images at their figure).
func (s *Server) claudeBreakpoints(req *messagesRequest) []breakpoint {
	c := s.counter(req.Model)
	var (
		tokens int64
		seen   strings.Builder
		marks  []breakpoint
	)
	seen.WriteString(req.Model)
	mark := func(raw json.RawMessage) {
		var b struct {
			CacheControl *struct {
				TTL string `json:"ttl"`
			} `json:"cache_control"`
		}
		if json.Unmarshal(raw, &b) != nil || b.CacheControl == nil {
			return
		}
		ttl := 5 * time.Minute
		if b.CacheControl.TTL == "1h" {
			ttl = time.Hour
		}
		marks = append(marks, breakpoint{key: sha256.Sum256([]byte(seen.String())),
			tokens: tokens, ttl: ttl})
	}
	block := func(raw json.RawMessage) {
		text, img := anthropicText(json.RawMessage("["+string(raw)+"]"), claudeHighRes(req.Model))
		tokens += claudeTokens(c, text) + img
		seen.Write(raw)
		mark(raw)
	}
	content := func(raw json.RawMessage) {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil { // a string: no breakpoint in it
			text, _ := anthropicText(raw, false)
			tokens += claudeTokens(c, text)
			seen.Write(raw)
			return
		}
		for _, b := range list {
			block(b)
		}
	}
	if len(req.Tools) > 0 {
		tokens += claudeToolPrompt
		for _, t := range req.Tools {
			tokens += claudeTokens(c, compact(t))
			seen.Write(t)
			mark(t)
		}
	}
	if len(req.System) > 0 {
		content(req.System)
	}
	for _, m := range req.Messages {
		tokens += 3
		seen.WriteString(m.Role)
		content(m.Content)
	}
	return marks
}

// useCache bills req's prompt of prompt tokens against the cache: what it
// reads, what it writes for how long (a prefix counted apart from the
// whole may count a few tokens more: it is held to the prompt).
func (s *Server) useCache(req *messagesRequest, prompt int64) cacheUse {
	marks := s.claudeBreakpoints(req)
	for i := range marks {
		marks[i].tokens = min(marks[i].tokens, prompt)
	}
	if len(marks) == 0 {
		return cacheUse{}
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		s.cache = map[[32]byte]time.Time{}
	}
	var use cacheUse
	from := 0
	for i := len(marks) - 1; i >= 0; i-- {
		if until, ok := s.cache[marks[i].key]; ok && now.Before(until) {
			use.read, from = marks[i].tokens, i+1
			s.cache[marks[i].key] = now.Add(marks[i].ttl)
			break
		}
	}
	done := use.read
	for _, m := range marks[from:] {
		if m.tokens < claudeMinCache || m.tokens <= done {
			continue
		}
		if m.ttl == time.Hour {
			use.write1h += m.tokens - done
		} else {
			use.write5m += m.tokens - done
		}
		done = m.tokens
		s.cache[m.key] = now.Add(m.ttl)
	}
	r := s.stats.Usage[req.Model]
	r.CacheReadTokens += use.read
	r.CacheWrite5mTokens += use.write5m
	r.CacheWrite1hTokens += use.write1h
	s.stats.Usage[req.Model] = r
	return use
}
