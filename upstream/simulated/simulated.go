// Package simulated is an OpenAI-compatible upstream that costs nothing: it
// answers chat, completions, embeddings and model listing with deterministic
// replies and a usage block that counts tokens honestly (the same BPE the
// real API uses). Tollgate's demo runs on it, load tests measure the gateway
// against it, and tests compare the gateway's ledger with what it reported.
package simulated

import (
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// Options configure a Server. The zero value serves o200k_base counts for
// every model, with no latency and no key check.
type Options struct {
	// StandardSpeed serves Anthropic fast-mode requests at standard speed,
	// billed at standard rates and reported so (usage.speed "standard"),
	// as Anthropic does when a model's fast mode is gone or full.
	StandardSpeed bool
	// Encodings maps a model to its tiktoken encoding; others use o200k_base.
	Encodings map[string]string
	// Models are listed by GET /v1/models.
	Models []string
	// APIKey, if set, is the only bearer token accepted.
	APIKey string
	// Latency is waited before the first byte of every answer.
	Latency time.Duration
	// Before, if set, runs before every answer (after the key check): a
	// test holds a request in flight by blocking in it.
	Before func(r *http.Request)
	// ChunkDelay is waited between stream chunks.
	ChunkDelay time.Duration
	// ReplyTokens picks a reply's length from the request's seed; nil means
	// 10 to 99 tokens. The request's output cap always wins.
	ReplyTokens func(seed uint64) int64
	// Dimensions is the default embedding size (1536 if zero).
	Dimensions int
	// Fault makes streams misbehave, as real upstreams sometimes do.
	Fault Fault
	// AWS, if set, are the credentials Bedrock's SigV4 signatures are
	// checked with (APIKey is then also taken as a Bedrock API key).
	AWS *AWSCredentials
	// Dialect makes the chat API answer as an OpenAI-compatible provider
	// that differs from OpenAI: "mistral" honours max_tokens only, refuses
	// stream_options and ends every stream with its usage; "groq" honours
	// max_tokens only and puts a stream's usage in the last chunk's
	// x_groq.usage, never in a usage chunk. "" is OpenAI.
	Dialect string
	// NoProviderHeaders leaves out the headers a provider puts on every
	// answer (meta): the answers carry what net/http writes and little
	// more, as the simulator's did before it sent them — the baseline a
	// benchmark of an earlier measurement is repeated on.
	NoProviderHeaders bool
}

// Fault is a way a stream can go wrong.
type Fault uint8

const (
	// Truncate ends a stream halfway: no finish, no usage, no [DONE].
	Truncate Fault = iota + 1
	// DropUsage never sends the usage chunk, even when asked.
	DropUsage
	// Stall sends half a stream, then nothing until the client leaves.
	Stall
	// IgnoreMaxTokens generates ReplyTokens whatever the request's cap.
	IgnoreMaxTokens
	// DoubleUsage sends the (cumulative) usage chunk twice.
	DoubleUsage
	// PartialUsage leaves completion_tokens out of a chat's usage, as
	// some OpenAI-compatible servers do: the output is billed all the same.
	PartialUsage
)

// Server is the simulated upstream. It is an http.Handler.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu    sync.Mutex
	stats Stats
	// accounts are the service accounts ServiceAccount issued, by email.
	accounts map[string]*rsa.PublicKey
	// cache is Anthropic's prompt cache: a marked prefix's key, until when
	// it is kept (cache.go).
	cache map[[32]byte]time.Time
}

// Stats is what the server has answered since it started.
type Stats struct {
	Requests int64
	// Usage sums the usage the server reported, per model.
	Usage map[string]Reported
}

// Reported is usage as reported to the client, and the output tokens
// actually sent (which differ when a stream is cut short or its usage lost).
type Reported struct {
	Requests, PromptTokens, CompletionTokens int64
	DeliveredTokens                          int64
	// BilledPromptTokens and BilledCompletionTokens are what a provider
	// bills: every request's whole prompt and every token it generated
	// (best_of candidates included), whether or not usage was reported
	// or the stream reached the client.
	BilledPromptTokens, BilledCompletionTokens int64
	// AudioPromptTokens is the audio part of the prompt tokens.
	AudioPromptTokens int64
	// BilledToolCalls are the hosted and server tool calls (searches,
	// results, fetches, code runs) billed per call (see surcharge);
	// BilledPromptTokens and BilledCompletionTokens hold the tokens of a
	// dearer tier or mode multiplied, at the list price.
	BilledToolCalls int64
	// CacheReadTokens, CacheWrite5mTokens and CacheWrite1hTokens are the
	// parts of BilledPromptTokens Anthropic's prompt cache bills apart:
	// read (0.1 × input), written for five minutes (1.25 ×) and for an
	// hour (2 ×).
	CacheReadTokens, CacheWrite5mTokens, CacheWrite1hTokens int64
}

// New returns a server.
func New(opts Options) (*Server, error) {
	if opts.Dimensions == 0 {
		opts.Dimensions = 1536
	}
	for _, enc := range opts.Encodings {
		if _, err := tokenizer.Load(enc); err != nil {
			return nil, err
		}
	}
	if _, err := tokenizer.Load("o200k_base"); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), stats: Stats{Usage: map[string]Reported{}}}
	s.mux.HandleFunc("POST /v1/chat/completions", s.chat)
	s.mux.HandleFunc("POST /v1/completions", s.completions)
	s.mux.HandleFunc("POST /v1/embeddings", s.embeddings)
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("POST /v1/messages", s.messages)
	s.mux.HandleFunc("POST /v1/responses", s.responses)
	s.mux.HandleFunc("POST /v1beta/models/{call}", s.gemini)
	s.mux.HandleFunc("POST /v1/projects/{project}/locations/{location}/publishers/google/models/{call}", s.gemini)
	s.mux.HandleFunc("POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{call}", s.vertexAnthropic)
	s.mux.HandleFunc("POST /model/{model}/{op}", s.converse)
	s.mux.HandleFunc("POST /token", s.token)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return
	}
	start := time.Now()
	s.mu.Lock()
	s.stats.Requests++
	n := s.stats.Requests
	s.mu.Unlock()
	if s.opts.Before != nil {
		s.opts.Before(r)
	}
	if s.opts.Latency > 0 {
		// A provider has the whole request before it answers, and works
		// on it whether or not anyone waits: a client that leaves before
		// the first byte is billed all the same (the answer goes nowhere).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-time.After(s.opts.Latency):
		case <-r.Context().Done():
			s.mux.ServeHTTP(discard{}, r)
			return
		}
	}
	if !s.opts.NoProviderHeaders {
		meta(w.Header(), r.URL.Path, n, time.Since(start))
	}
	s.mux.ServeHTTP(w, r)
}

// discard is an answer no one reads.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
func (discard) Flush()                      {}

// meta sets the headers a provider puts on every answer it serves,
// whatever the answer holds, as its API reference lists them: OpenAI's
// request id, organisation, API version, processing time and the
// account's six rate-limit headers; Anthropic's request id, organisation
// and rate limits; Bedrock's request id. A gateway passes the request ids
// on and keeps the account's own headers (its organisation, its limits)
// from its clients; and a proxy measured against this upstream relays as
// many headers as it would in front of the real one.
func meta(h http.Header, path string, n int64, took time.Duration) {
	switch {
	case strings.HasPrefix(path, "/model/"): // Bedrock
		h.Set("X-Amzn-Requestid", fmt.Sprintf("5e1c2a9f-0000-4000-8000-%012x", n))
	case path == "/v1/messages" || strings.Contains(path, "/publishers/anthropic/"):
		reset := time.Now().UTC().Add(time.Second).Format(time.RFC3339)
		h.Set("Request-Id", fmt.Sprintf("req_011CSim%016x", n))
		h.Set("Anthropic-Organization-Id", "5a0c1e9d-sim0-4a7e-9c1b-3f2d6e8a0b41")
		for _, l := range []struct{ name, limit, remaining string }{
			{"requests", "4000", "3999"},
			{"tokens", "2000000", "1999000"},
			{"input-tokens", "2000000", "1999000"},
			{"output-tokens", "400000", "399000"},
		} {
			h.Set("Anthropic-Ratelimit-"+l.name+"-Limit", l.limit)
			h.Set("Anthropic-Ratelimit-"+l.name+"-Remaining", l.remaining)
			h.Set("Anthropic-Ratelimit-"+l.name+"-Reset", reset)
		}
	case strings.HasPrefix(path, "/v1/projects/"): // Vertex AI's Gemini: none of these
	case strings.HasPrefix(path, "/v1/"): // OpenAI
		h.Set("X-Request-Id", fmt.Sprintf("req_%032x", n))
		h.Set("Openai-Organization", "user-simulated")
		h.Set("Openai-Processing-Ms", strconv.FormatInt(took.Milliseconds(), 10))
		h.Set("Openai-Version", "2020-10-01")
		h.Set("X-Ratelimit-Limit-Requests", "10000")
		h.Set("X-Ratelimit-Limit-Tokens", "30000000")
		h.Set("X-Ratelimit-Remaining-Requests", "9999")
		h.Set("X-Ratelimit-Remaining-Tokens", "29999000")
		h.Set("X-Ratelimit-Reset-Requests", "6ms")
		h.Set("X-Ratelimit-Reset-Tokens", "2ms")
	}
}

// Stats returns a copy of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Requests: s.stats.Requests, Usage: make(map[string]Reported, len(s.stats.Usage))}
	for k, v := range s.stats.Usage {
		out.Usage[k] = v
	}
	return out
}

func (s *Server) record(model string, prompt, completion int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.stats.Usage[model]
	r.Requests++
	r.PromptTokens += prompt
	r.CompletionTokens += completion
	s.stats.Usage[model] = r
}

// bill records what the provider bills for one request, as it generates.
func (s *Server) bill(model string, prompt, completion int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.stats.Usage[model]
	r.BilledPromptTokens += prompt
	r.BilledCompletionTokens += completion
	s.stats.Usage[model] = r
}

// billAudio adds the audio part of a prompt billed.
func (s *Server) billAudio(model string, tokens int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.stats.Usage[model]
	r.AudioPromptTokens += tokens
	s.stats.Usage[model] = r
}

func (s *Server) delivered(model string, tokens int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.stats.Usage[model]
	r.DeliveredTokens += tokens
	s.stats.Usage[model] = r
}

func (s *Server) counter(model string) *tokenizer.Counter {
	enc := s.opts.Encodings[model]
	if enc == "" {
		enc = "o200k_base"
	}
	c, _ := tokenizer.Load(enc) // loaded in New
	return c
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range s.opts.Models {
		list.Data = append(list.Data, model{ID: m, Object: "model", Created: 1700000000, OwnedBy: "tollgate-simulated"})
	}
	writeJSON(w, http.StatusOK, list)
}

// words are each one token, with their leading space, in both o200k_base
// and cl100k_base, so a reply of n words is exactly n tokens.
var words = strings.Fields("the of and to in is that for it as with on be this by are or from at an was we can all will more one has not but")

func reply(seed uint64, n int64) string {
	var b strings.Builder
	for i := range n {
		b.WriteByte(' ')
		b.WriteString(words[(seed+uint64(i)*7919)%uint64(len(words))])
	}
	return b.String()
}

func seedOf(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func (s *Server) replyTokens(seed uint64, limit int64) (n int64, finish string) {
	n = 10 + int64(seed%90)
	if s.opts.ReplyTokens != nil {
		n = s.opts.ReplyTokens(seed)
	}
	if s.opts.Fault == IgnoreMaxTokens {
		return n, "stop"
	}
	if limit > 0 && n >= limit {
		return limit, "length"
	}
	return n, "stop"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
}

func id(prefix string, seed uint64) string { return fmt.Sprintf("%s-sim%016x", prefix, seed) }

// eventWriter starts an SSE answer and returns the function that sends one
// event (named, or data only when event is empty), flushes it and waits
// ChunkDelay; it reports false once the client is gone.
func (s *Server) eventWriter(w http.ResponseWriter, r *http.Request) func(event string, v any) bool {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	return func(event string, v any) bool {
		b, _ := json.Marshal(v)
		var err error
		if event != "" {
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		} else {
			_, err = fmt.Fprintf(w, "data: %s\n\n", b)
		}
		if err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		if s.opts.ChunkDelay > 0 {
			select {
			case <-time.After(s.opts.ChunkDelay):
			case <-r.Context().Done():
				return false
			}
		}
		return true
	}
}

// authorized checks a request's credential as its provider would: the API
// key as a bearer token, in x-api-key, x-goog-api-key or ?key=; Vertex AI's
// issued token; Bedrock's signature (checked by its handler, which reads
// the body it signs).
func (s *Server) authorized(r *http.Request) bool {
	switch {
	case r.URL.Path == "/token", strings.HasPrefix(r.URL.Path, "/model/"):
		return true
	case strings.HasPrefix(r.URL.Path, "/v1/projects/"):
		return s.opts.APIKey == "" || r.Header.Get("Authorization") == "Bearer "+vertexToken
	}
	key := s.opts.APIKey
	return key == "" || r.Header.Get("Authorization") == "Bearer "+key || r.Header.Get("X-Api-Key") == key ||
		r.Header.Get("X-Goog-Api-Key") == key || r.URL.Query().Get("key") == key
}

// streamWords sends text two words a chunk — real streams carry a token or
// a few — through send, counting the words delivered to model (each is a
// token of reply text). Under Truncate or Stall it stops once *sent
// reaches half (Stall first waits for the client to leave). It reports
// whether all of text was sent.
func (s *Server) streamWords(r *http.Request, model, text string, half int64, sent *int64, send func(piece string, last bool) bool) bool {
	words := strings.Fields(text)
	for j := 0; j < len(words); j += 2 {
		if (s.opts.Fault == Truncate || s.opts.Fault == Stall) && *sent >= half {
			if s.opts.Fault == Stall {
				<-r.Context().Done()
			}
			return false
		}
		k := min(2, len(words)-j)
		if !send(strings.Join(words[j:j+k], " "), j+k >= len(words)) {
			return false
		}
		*sent += int64(k)
		s.delivered(model, int64(k))
	}
	return true
}
