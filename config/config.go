// Package config is Tollgate's configuration: plain structs decoded strictly
// from YAML (unknown fields are errors with line numbers), SetDefaults and
// Validate. It holds no behaviour beyond parsing and checking; the gateway
// turns a valid Config into limits and routes elsewhere.
package config

import (
	"math"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// Config is the whole file.
type Config struct {
	// Listen is the gateway's address, e.g. ":8080".
	Listen string `yaml:"listen"`
	// MetricsListen, if set, serves /metrics on its own address (e.g.
	// "127.0.0.1:9464") instead of the gateway's.
	MetricsListen string `yaml:"metrics_listen"`
	// MaxBodyBytes bounds a request body; larger ones get 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Server bounds how long a client connection may take over its
	// headers and body, and how long it may sit idle.
	Server Server `yaml:"server"`
	// TimeZone is the default calendar for budgets (IANA name, default UTC).
	TimeZone string `yaml:"time_zone"`
	// Lease is how long a reservation lives without settlement before it
	// is charged in full.
	Lease time.Duration `yaml:"lease"`
	// TrustedProxies are the CIDRs whose X-Forwarded-For is believed when
	// finding a client's IP (for per-IP limits); others are the client.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// AuthFailures limits failed authentications per client IP: past
	// Limit in Window the answer is 429 with Retry-After (brute force,
	// credential stuffing). Default 30 a minute; Limit -1 turns it off.
	AuthFailures AuthFailures `yaml:"auth_failures"`
	// Bypass configures signed limit bypass for internal services.
	Bypass Bypass `yaml:"bypass"`
	// LedgerPath is the append-only JSON-lines file every settlement is
	// written to (fsync'd, group commit); with the embedded store reports
	// read it. With the Redis store it needs LedgerPostgres and is only
	// this instance's local copy: it misses the other instances'
	// settlements and the sweeps they make of this one's reservations.
	// Empty: none.
	LedgerPath string `yaml:"ledger_path"`
	// LedgerPostgres is the PostgreSQL connection string (URL or key=value,
	// write it as ${ENV_VAR}) of the production ledger; reports read its
	// tollgate_ledger table. With the Redis store each settlement (and
	// each sweep's charge, and a late settlement's correction of it) is
	// written to a Redis Stream in the same script that settles it, and
	// every instance moves the streams into the table through one consumer
	// group; it is the one ledger every instance's reports read. With the
	// embedded store the ledger_path file is shipped to it. Idempotent by
	// id, at least once. Empty: none.
	LedgerPostgres string `yaml:"ledger_postgres"`
	// KeysPath is where the embedded store keeps API keys made through the
	// admin API (JSON, hashes only). Empty: the admin API cannot make keys.
	// With the Redis store they are kept in Redis.
	KeysPath string `yaml:"keys_path"`
	// AuditPath is the append-only file of admin changes (who, when, old,
	// new) with the embedded store. With the Redis store the trail every
	// instance reads is in PostgreSQL (with ledger_postgres) or Redis, and
	// this file keeps a local copy of this instance's changes. Empty, with
	// the embedded store: changes are logged only.
	AuditPath string `yaml:"audit_path"`
	// AdminTokens may use the admin API, by role: admin (everything),
	// finance (ceilings and reports for all teams), viewer (reports for
	// Teams only).
	AdminTokens []AdminToken `yaml:"admin_tokens"`
	// AdminNotice is a line shown atop the finance page ("staging", "demo
	// data before …").
	AdminNotice string `yaml:"admin_notice"`
	// Alerts are sent when a budget passes its soft thresholds.
	Alerts Alerts `yaml:"alerts"`
	// Tracing sends OpenTelemetry traces over OTLP; off by default.
	Tracing Tracing `yaml:"tracing"`
	// RouteCosts weigh a route's requests for "requests" limits (default 1
	// each), e.g. {/v1/embeddings: 5}.
	RouteCosts map[string]int64 `yaml:"route_costs"`
	// UserHeader names the request header that identifies an end user for
	// per-user limits; the request body's "user" field is used otherwise.
	UserHeader string `yaml:"user_header"`

	Store      Store       `yaml:"store"`
	PaidRoutes []PaidRoute `yaml:"paid_routes"`
	Upstreams  []Upstream  `yaml:"upstreams"`
	// Aliases are public model names served by several deployments
	// (an upstream and the model it is called there), across providers.
	Aliases map[string]Alias   `yaml:"aliases"`
	Models  map[string]Model   `yaml:"models"`
	Plans   map[string][]Limit `yaml:"plans"`
	Orgs    []Org              `yaml:"orgs"`
}

// Bypass lets internal services skip limits with a signed header:
// X-Tollgate-Signature: t=<unix seconds>,n=<nonce>,s=<hex HMAC-SHA256>
// over "METHOD\nPATH\nhex(sha256(body))\nt\nnonce" with one of Secrets.
// Bypassed requests are still metered, priced, logged and counted.
type Bypass struct {
	Secrets []BypassSecret `yaml:"secrets"`
	// Window is the allowed clock skew either way (default 300s); a nonce
	// is refused if seen again within it.
	Window time.Duration `yaml:"window"`
}

// BypassSecret is one caller's shared secret (write it as ${ENV_VAR}).
type BypassSecret struct {
	ID     string `yaml:"id"`
	Secret string `yaml:"secret"`
}

// Server bounds client connections against slow clients (slowloris). A
// body must arrive within BodyGrace + its size / MinBodyRate, and within
// BodyTimeout whatever its size; a slower one gets 408.
type Server struct {
	// ReadHeaderTimeout bounds the request line and headers (default 10s).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// BodyTimeout bounds a whole request body (default 60s).
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// BodyGrace is the time a body gets before MinBodyRate applies
	// (default 5s).
	BodyGrace time.Duration `yaml:"body_grace"`
	// MinBodyRate is the slowest a body may arrive after BodyGrace, in
	// bytes a second (default 16384).
	MinBodyRate int64 `yaml:"min_body_rate"`
	// IdleTimeout closes a keep-alive connection idle this long (default
	// 60s).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections bounds the connections open at once; more wait to be
	// accepted (default 4096).
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerAddress bounds the connections one client address
	// holds (default 1024; -1: no bound); more are closed at once, so one
	// client cannot hold every connection. Behind a load balancer, whose
	// few addresses carry everyone's connections, raise it or turn it off.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// DrainTimeout is the drain budget at shutdown (default 30s): how long
	// in-flight requests may take to finish — streams, and answers read to
	// their usage for clients that left. Upstream exchanges still live
	// then are ended, each charged its reservation.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// GCPercent is the Go garbage collector's target (what GOGC sets),
	// applied at start: the heap may grow this many percent over what is
	// live before a collection (default 400; -1 turns the collector off).
	// The gateway's live heap is mostly its pointer-free token tables, a
	// few tens of megabytes; at Go's own 100 the collector ran every few
	// hundred requests and cost a tenth of a request's instructions. The
	// GOGC environment variable, where set, wins.
	GCPercent int `yaml:"gc_percent"`
	// LimitHeaders is what an allowed response says of the limits:
	// LimitHeadersStandard (the default) sends RateLimit-Policy and
	// RateLimit (IETF httpapi draft), which hold every limit's quota,
	// remaining and reset; LimitHeadersAll adds the X- duplicates of the
	// deciding limit (X-RateLimit-*) and of the tightest dollar budget
	// (X-Tollgate-Budget-*). A refusal carries them all either way. The
	// eight duplicates were an eighth of an allowed request's CPU: net/http
	// sorts, escapes and writes every header, and a response past fourteen
	// of them has its header map regrown (BENCHMARKS.md, sixth session on
	// issue 17).
	LimitHeaders string `yaml:"limit_headers"`
}

// The values of Server.LimitHeaders.
const (
	LimitHeadersStandard = "standard"
	LimitHeadersAll      = "all"
)

// Tracing is OpenTelemetry tracing: one span per request with a child per
// step (auth, estimate, reserve, queue, upstream, settle), exported over
// OTLP/HTTP; the upstream gets a W3C traceparent.
type Tracing struct {
	// Endpoint is the collector's OTLP/HTTP address, e.g.
	// "http://otel-collector:4318" (traces go to /v1/traces); empty: off.
	Endpoint string `yaml:"otlp_endpoint"`
	// SampleRatio is the share of requests traced that arrive without a
	// sampled parent (default 1); a caller's sampled traceparent is
	// always followed.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName names the gateway in traces (default "tollgate").
	ServiceName string `yaml:"service_name"`
	// Headers are sent with every export (an API key: write it as ${ENV}).
	Headers map[string]string `yaml:"headers"`
}

// Alerts fire once per threshold per budget per period (across all
// instances) to every webhook, with a Slack-compatible JSON body.
type Alerts struct {
	// Thresholds are percentages of a budget's settled spend (default 50,
	// 80, 100). 100 also fires at the first request refused because the
	// budget is exhausted.
	Thresholds []int64 `yaml:"thresholds"`
	// IncludePending counts what requests in flight hold as spent, so an
	// alert comes before the spend settles (and may come for spend that
	// never happens); its alerts say "reserved" rather than "spent".
	IncludePending bool `yaml:"include_pending"`
	// Webhooks receive the alerts; write URLs with secrets as ${ENV}.
	Webhooks []string `yaml:"webhooks"`
}

// AdminToken is one admin API bearer token, stored as its hash.
type AdminToken struct {
	Name string `yaml:"name"`
	// Hash is "sha256:<hex>" of the token (tollgate keys new makes one).
	Hash  string   `yaml:"hash"`
	Role  string   `yaml:"role"`
	Teams []string `yaml:"teams"` // for viewers: "org/team"
}

// AuthFailures is the per-IP limit on failed authentications.
type AuthFailures struct {
	Limit  int64         `yaml:"limit"`
	Window time.Duration `yaml:"window"`
}

// Store selects where budget state lives.
type Store struct {
	// Kind is "embedded" (one instance; the default) or "redis" (many
	// instances sharing budgets).
	Kind string `yaml:"kind"`
	// Redis configures the redis store.
	Redis Redis `yaml:"redis"`
	// SnapshotPath is where the embedded store saves its state; empty
	// keeps state in memory only (lost on restart).
	SnapshotPath string `yaml:"snapshot_path"`
	// SnapshotInterval is how often the embedded store saves.
	SnapshotInterval time.Duration `yaml:"snapshot_interval"`
}

// PaidRoute forwards a path prefix to any paid HTTP API and prices each
// call by a rule: a fixed price per request, plus a price per unit read
// from a response header or a JSON field. Every call reserves the rule's
// maximum (PerRequest + PerUnit × MaxUnits) before it is forwarded.
type PaidRoute struct {
	// Name identifies the route in limits, metrics and the ledger.
	Name string `yaml:"name"`
	// Prefix is the gateway path, e.g. /paid/geocode; what follows it is
	// appended to BaseURL.
	Prefix  string `yaml:"prefix"`
	BaseURL string `yaml:"base_url"`
	APIKey  string `yaml:"api_key"`
	// AuthHeader carries APIKey: "Authorization" (as a Bearer token, the
	// default) or any header name (the key as is).
	AuthHeader string        `yaml:"auth_header"`
	Timeout    time.Duration `yaml:"timeout"`
	PerRequest Money         `yaml:"per_request"`
	PerUnit    Money         `yaml:"per_unit"`
	// UnitsHeader or UnitsJSON (a gjson path into a JSON body) say how many
	// units a call used, rounded up to whole units.
	UnitsHeader string `yaml:"units_header"`
	UnitsJSON   string `yaml:"units_json"`
	// UnitsLimit says where each request states the most units it may be
	// billed (a query parameter, a header, a JSON member, or the body's
	// length): a call is reserved for that many and refused with 400 when
	// it is missing or past MaxUnits. A route priced per unit needs one:
	// units no request bounds cannot be reserved.
	UnitsLimit bound.Units `yaml:"units_limit"`
	MaxUnits   int64       `yaml:"max_units"`
	// UnbilledStatuses are the answer statuses the API does not bill
	// (e.g. 401, 429, 500): charged nothing. Every other answer — 3xx and
	// errors included — is charged by the rule; a call forwarded that gets
	// no answer is charged its reservation.
	UnbilledStatuses []int `yaml:"unbilled_statuses"`
}

// Redis is the shared store of many gateway instances.
type Redis struct {
	// Addrs: one address is a single node; several are a Redis Cluster's
	// seed nodes; with MasterName they are Sentinels.
	Addrs      []string `yaml:"addrs"`
	MasterName string   `yaml:"master_name"`
	Username   string   `yaml:"username"`
	// Password: write it as ${ENV_VAR}.
	Password string `yaml:"password"`
	DB       int    `yaml:"db"`
	// Prefix starts every key (default "tg").
	Prefix string `yaml:"prefix"`
	// PoolSize is the connections per node (default 256): a reservation
	// waiting for a free connection counts against its timeout.
	PoolSize int `yaml:"pool_size"`
	// Timeout bounds a reservation (default 1s; the request's own deadline
	// too); past it the store counts as unavailable for that request. A
	// call that times out while Redis answers others does not count
	// towards opening the store's breaker: slow is not down.
	Timeout time.Duration `yaml:"timeout"`
	// SettleTimeout bounds a settlement before it is spooled (default 1s).
	SettleTimeout time.Duration `yaml:"settle_timeout"`
	// SpoolPath is the append-only file of settlements waiting for Redis;
	// empty keeps them in memory only (lost if the process dies too).
	SpoolPath string `yaml:"spool_path"`
	// SpoolMax is the spool depth past which /readyz reports the instance
	// not ready (default 100000): it keeps every settlement, but a load
	// balancer should send new traffic elsewhere.
	SpoolMax int `yaml:"spool_max"`
	// OnUnavailable is what a reservation does when Redis cannot be
	// reached: "fail_closed" (503, the default), "fail_open" (forward and
	// settle later), or "local_fallback" (a local bucket per instance with
	// each limit divided by Instances). OnUnavailableRoutes overrides it
	// per route ("/v1/embeddings": fail_open).
	OnUnavailable       string            `yaml:"on_unavailable"`
	OnUnavailableRoutes map[string]string `yaml:"on_unavailable_routes"`
	// Instances is how many gateway instances share the limits; a local
	// fallback bucket gets 1/Instances of each limit.
	Instances int `yaml:"instances"`
	// AllowEviction starts even when Redis's maxmemory-policy may evict
	// budget keys (with a loud warning); by default the gateway refuses.
	AllowEviction bool `yaml:"allow_eviction"`
	// Exact reserves and settles every request in Redis, one script call
	// each. By default (false) budget leases are on: each instance leases
	// slices of its buckets' room and admits requests against them with no
	// round trip, flushing spend every LeaseFlush (see
	// redisstore.LeaseOptions).
	Exact bool `yaml:"exact"`
	// LeaseFlush is how often leased spend is flushed and slices renewed
	// (default 200ms, at most 1s).
	LeaseFlush time.Duration `yaml:"lease_flush"`
	// LeaseTTL is how long a dead instance's slices live before another
	// instance charges them in full (default 10s; at least 10 × LeaseFlush).
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// ReplayWindow is how long an instance keeps each write Redis
	// acknowledged, to write it again if Redis loses it — a failover to
	// a replica that had not received it (default 10s). A loss older than
	// that, or Redis restarted without its data, refuses the org until it
	// is rebuilt from the ledger (automatic with ledger_postgres).
	ReplayWindow time.Duration `yaml:"replay_window"`
}

// Upstream is one provider endpoint.
type Upstream struct {
	Name string `yaml:"name"`
	// Kind is the wire protocol: "openai" (any OpenAI-compatible API),
	// "azure" (Azure OpenAI: deployments in the path, api-version, api-key),
	// "anthropic" (the Messages API), "gemini" (the Gemini API), "vertex"
	// (Vertex AI: Gemini and Claude) or "bedrock" (Bedrock's Converse).
	Kind string `yaml:"kind"`
	// Preset names an OpenAI-compatible provider (mistral, groq, deepseek,
	// together, fireworks, openrouter, xai, vllm, ollama): its address by
	// default, its quirks (the output cap field it honours, how its
	// streams report usage) and its prices in the catalogue.
	Preset string `yaml:"preset"`
	// APIVersion is Azure's api-version query parameter.
	APIVersion string `yaml:"api_version"`
	// Deployments maps a model to its Azure deployment name (default: the
	// model's name).
	Deployments map[string]string `yaml:"deployments"`
	// Region, AccessKeyID, SecretAccessKey and SessionToken sign Bedrock's
	// requests (AWS SigV4); api_key instead is a Bedrock API key.
	Region          string `yaml:"region"`
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey string `yaml:"secret_access_key"`
	SessionToken    string `yaml:"session_token"`
	// Project, Location and CredentialsFile (a service account's JSON
	// key) are Vertex AI's.
	Project         string `yaml:"project"`
	Location        string `yaml:"location"`
	CredentialsFile string `yaml:"credentials_file"`
	// BaseURL is the API root, e.g. https://api.openai.com/v1. ${ENV} is expanded.
	BaseURL string `yaml:"base_url"`
	// APIKey is sent upstream; write it as ${ENV_VAR}, never inline.
	APIKey string `yaml:"api_key"`
	// Models are the model names this upstream serves; each needs an entry
	// in Config.Models.
	Models []string `yaml:"models"`
	// Timeout bounds one whole upstream exchange, stream included.
	Timeout time.Duration `yaml:"timeout"`
	// ConnectTimeout bounds opening a connection (default 10s),
	// FirstByteTimeout the wait for response headers (default 5m), and
	// IdleTimeout the gap between two chunks of a stream (default 2m).
	ConnectTimeout   time.Duration `yaml:"connect_timeout"`
	FirstByteTimeout time.Duration `yaml:"first_byte_timeout"`
	IdleTimeout      time.Duration `yaml:"idle_timeout"`
	// Queue paces requests to the provider's quota; nil means none.
	Queue *Queue `yaml:"queue"`
	// Breaker opens after consecutive failures.
	Breaker Breaker `yaml:"breaker"`
	// Fallbacks are upstreams (serving the same models) tried in order
	// when this one's breaker is open or its queue is full, or it fails
	// before any byte reached the client (a connection error, a timeout
	// before the answer, a 5xx or a 429).
	Fallbacks []string `yaml:"fallbacks"`
	// Prices override the models table for models served here (a fallback
	// provider may charge differently); requests are reserved at the
	// highest price among the upstreams that may serve them and settled at
	// the price of the one that did.
	Prices map[string]Price `yaml:"prices"`
	// PassFields are top-level request fields the gateway does not know
	// that it forwards to this upstream unread, and PassBetas anthropic-beta
	// values likewise, and PassHeaders client headers forwarded as they
	// are (the gateway forwards none but Accept and User-Agent otherwise):
	// the operator takes the bill's risk of what they switch on
	// (docs/bounds.md). Any other unknown field or beta is refused with
	// 400.
	PassFields  []string `yaml:"pass_fields"`
	PassHeaders []string `yaml:"pass_headers"`
	PassBetas   []string `yaml:"pass_betas"`
}

// Alias is a public model name and the deployments that serve it. A
// request for it goes to one deployment, picked by Strategy; on a
// connection error, a timeout, a 5xx or a 429 before any byte reached the
// client it goes to the next. It is reserved at the dearest deployment
// and settled at the price of the one that served.
type Alias struct {
	// Strategy is "weighted" (the default: by weight, at random),
	// "least_busy" (the upstream with the fewest requests in flight
	// first) or "ordered" (the list's order: a primary and fallbacks).
	Strategy    string       `yaml:"strategy"`
	Deployments []Deployment `yaml:"deployments"`
}

// Deployment is one way to serve an alias: an upstream and the model it
// is called there (which that upstream must list).
type Deployment struct {
	Upstream string `yaml:"upstream"`
	Model    string `yaml:"model"`
	// Weight is the deployment's share under the weighted strategy
	// (default 1; 0: only when the others fail).
	Weight *int `yaml:"weight"`
}

// Queue is an upstream's leaky bucket: requests wait fairly across teams
// and leave at Rate per second and/or TokensPerMinute, and/or at most
// Concurrency at a time.
type Queue struct {
	MaxLength       int           `yaml:"max_length"`
	Rate            float64       `yaml:"rate"`
	TokensPerMinute int64         `yaml:"tokens_per_minute"`
	Concurrency     int           `yaml:"concurrency"`
	MaxWait         time.Duration `yaml:"max_wait"`
}

// Breaker opens after Failures consecutive failures (connection errors,
// timeouts, 5xx, 429) for OpenFor, then lets Probes requests test it.
// Zero values: 5, 30s, 1.
type Breaker struct {
	Failures uint32        `yaml:"failures"`
	OpenFor  time.Duration `yaml:"open_for"`
	Probes   uint32        `yaml:"probes"`
}

// Price is a per-upstream price, per one million tokens.
type Price struct {
	Input       Money `yaml:"input"`
	CachedInput Money `yaml:"cached_input"`
	CacheWrite  Money `yaml:"cache_write"`
	// CacheWrite1h is the one-hour cache write's rate (zero: the model's).
	CacheWrite1h Money `yaml:"cache_write_1h"`
	Output       Money `yaml:"output"`
}

// Model is one priced model.
type Model struct {
	// Encoding is the tiktoken encoding that counts its tokens
	// (o200k_base for gpt-4o/4.1/o-series, cl100k_base for older models).
	Encoding string `yaml:"encoding"`
	// Input, CachedInput and Output are prices per one million tokens, as
	// integer micro-dollars or a dollar string such as "$2.50".
	Input       Money `yaml:"input"`
	CachedInput Money `yaml:"cached_input"`
	// CacheWrite is the price of input written to the provider's cache
	// (Anthropic's cache_creation_input_tokens) for five minutes, and
	// CacheWrite1h for an hour (ttl "1h"; Anthropic: twice the input).
	CacheWrite   Money `yaml:"cache_write"`
	CacheWrite1h Money `yaml:"cache_write_1h"`
	Output       Money `yaml:"output"`
	// Reasoning, InputAudio and OutputAudio price reasoning, audio input
	// and audio output tokens where the model prices them apart.
	Reasoning   Money `yaml:"reasoning"`
	InputAudio  Money `yaml:"input_audio"`
	OutputAudio Money `yaml:"output_audio"`
	// Above prices a whole request whose input passes a number of tokens
	// at its own rates (long-context pricing).
	Above *Tier `yaml:"above"`
	// WebSearch, when set, lets the model's requests use the provider's
	// web search (Anthropic's server tool, OpenAI's Responses tool),
	// refused without it: see WebSearch.
	WebSearch *WebSearch `yaml:"web_search"`
	// FastMode is the multiple of the price Anthropic's fast mode bills
	// (speed "fast", with its beta: 6 on Claude Opus 4.6), and
	// InferenceGeoUS the multiple US-only inference bills (inference_geo
	// "us": 1.1). Unset, a request that asks for either is refused.
	FastMode       float64 `yaml:"fast_mode"`
	InferenceGeoUS float64 `yaml:"inference_geo_us"`
	// TokenRatio, for a model whose tokenizer is not one of OpenAI's
	// (Claude, Gemini, Llama, Mistral…), bounds its input as
	// ceil(BPE count × ratio): a calibrated estimate, the operator's
	// opt-in, tuned with tollgate_estimate_actual_ratio. Unset, such a
	// model's text is bounded by its UTF-8 bytes, which no byte-level
	// tokenizer exceeds (CountsBytes). 1 for a model counted with its
	// own encoding.
	TokenRatio float64 `yaml:"token_ratio"`
	// DigitTokens counts every digit of the input as a token of its own,
	// on top of the BPE count (which groups up to three digits in one),
	// before token_ratio scales it (bytes count every digit already): for a model whose tokenizer splits numbers into digits, so
	// that a prompt of digits is bounded at least at what it bills.
	// Default true for Gemini and Gemma models; set it for others whose
	// tokenizer does the same (Llama 2, Mistral).
	DigitTokens *bool `yaml:"digit_tokens"`
	// MaxOutputTokens is the model's own output limit; a request asking for
	// more is refused.
	MaxOutputTokens int64 `yaml:"max_output_tokens"`
	// DefaultOutputTokens caps a request that sets no limit; the gateway
	// writes it into the forwarded request so the estimate is an upper bound.
	DefaultOutputTokens int64 `yaml:"default_output_tokens"`
	// ImageTokens bounds one input image, in input tokens: the most an
	// image can cost on this model. Unset, it defaults to the provider's
	// figure for the model's family (see the README); a model of no known
	// family then refuses images rather than take them unpriced.
	ImageTokens int64 `yaml:"image_tokens"`
	// ImageTokensLow bounds an image sent with detail "low", where the
	// model bills those at a fixed lower figure.
	ImageTokensLow int64 `yaml:"image_tokens_low"`
	// PDFPageTokens bounds one page of a PDF sent inline, in input
	// tokens: a PDF is reserved as its page count times this. Unset, it
	// defaults to the model family's figure (see the README); a model of
	// no known family then refuses PDFs.
	PDFPageTokens int64 `yaml:"pdf_page_tokens"`
	// AudioTokensPerSecond bounds input audio (chat's input_audio parts,
	// WAV or MP3): a clip is reserved as its longest playing time times
	// this. Unset, OpenAI's models with an audio input price take 20
	// (they bill about 10: one token per 100 ms); others refuse audio.
	AudioTokensPerSecond float64 `yaml:"audio_tokens_per_second"`
	// Embedding marks an embeddings model (no output tokens).
	Embedding bool `yaml:"embedding"`
	// Priced says where the prices in force come from: "config",
	// "catalogue" (its provider, model and date) or both. Set by
	// SetDefaults; not read from the file.
	Priced string `yaml:"-"`
	// Provider is the catalogue provider the model was resolved at (its
	// first upstream's). Set by SetDefaults.
	Provider string `yaml:"-"`
	// Foreign is true when the model's tokenizer is not the encoding it is
	// counted with (only OpenAI's models are counted exactly): its count is
	// scaled by TokenRatio. Set by SetDefaults.
	Foreign bool `yaml:"-"`
}

// CountsBytes reports whether m's text is bounded by its UTF-8 bytes, a
// proof: its tokenizer is not the encoding it is counted with, and the
// operator set no token_ratio to calibrate a BPE count instead.
func (m Model) CountsBytes() bool { return m.Foreign && m.TokenRatio == 0 }

// WebSearch prices and bounds a model's web search: Anthropic's server
// tool (web_search_*), OpenAI's Responses tool (web_search,
// web_search_preview). The provider runs the searches in a loop of its
// own, bills each one, and reads its results into the context, where
// they bill as input the request's text does not show.
type WebSearch struct {
	// Price is one search's ($10 per 1,000 at Anthropic and OpenAI:
	// "$0.01"; OpenAI's older non-reasoning rates were up to $0.03).
	Price Money `yaml:"price"`
	// MaxUses is the most searches one request may run: a tool's
	// max_uses (Anthropic) or the request's max_tool_calls (OpenAI) may
	// not pass it, and a request without one is sent with it.
	MaxUses int64 `yaml:"max_uses"`
	// ResultTokens bounds the input one search's results add. The
	// provider publishes no limit: this is the operator's figure, and the
	// bound holds only as far as it does (tollgate_overruns_total counts
	// a request billed past its reservation).
	ResultTokens int64 `yaml:"result_tokens"`
}

// PerMille is a price multiple (fast_mode, inference_geo_us) in
// thousandths, as the bound computes with it: 0 where it is unset.
func PerMille(x float64) int64 { return int64(math.Round(x * 1000)) }

// Tier is a long-context price: a request whose input tokens are more
// than Tokens is priced at these rates per million tokens (an unset one:
// the model's base rate).
type Tier struct {
	Tokens       int64 `yaml:"tokens"`
	Input        Money `yaml:"input"`
	CachedInput  Money `yaml:"cached_input"`
	CacheWrite   Money `yaml:"cache_write"`
	CacheWrite1h Money `yaml:"cache_write_1h"`
	Output       Money `yaml:"output"`
}

// Limit is one limit attached to a scope. Amount, Burst: integers in the
// limit's unit; for unit "usd" also dollar strings ("$500").
type Limit struct {
	Name string `yaml:"name"`
	// Kind is "rate", "budget" or "concurrency".
	Kind string `yaml:"kind"`
	// Unit is "tokens", "requests" or "usd" (concurrency: requests).
	Unit   string `yaml:"unit"`
	Amount Money  `yaml:"amount"`
	// Burst is a rate limit's bucket size; zero means Amount.
	Burst Money `yaml:"burst"`
	// Window is a rate limit's refill window (default 1m).
	Window time.Duration `yaml:"window"`
	// Algorithm is how a rate limit counts: token_bucket (the default;
	// gcra is the same), fixed_window or sliding_window.
	Algorithm string `yaml:"algorithm"`
	// Period is a budget's calendar span: "day" or "month".
	Period string `yaml:"period"`
	// TimeZone overrides the org's calendar for this budget.
	TimeZone string `yaml:"time_zone"`
	// Shadow evaluates and counts the limit (metrics, logs) but never
	// refuses: roll a new limit out and see who it would have refused.
	Shadow bool `yaml:"shadow"`
	// KeyBy splits the limit's bucket by request attributes, within its
	// scope: "ip" (the client address), "endpoint" (the route), "user".
	// A team limit keyed by [user, endpoint] holds per user per route.
	KeyBy []string `yaml:"key_by"`
	// Endpoints restricts the limit to these routes (e.g. a stricter limit
	// on /v1/embeddings); empty means every route.
	Endpoints []string `yaml:"endpoints"`
	// Shards spreads a busy rate limit over N buckets, each holding 1/N of
	// it; a request's id picks its shard (hot keys in Redis Cluster).
	Shards int64 `yaml:"shards"`
	// OverBudget is what a budget does with a request whose estimate is
	// more than it has left: "refuse" (the default) or "clamp": write the
	// largest output cap that fits into the forwarded request instead, if
	// at least ClampMinOutputTokens fit.
	OverBudget string `yaml:"over_budget"`
	// ClampMinOutputTokens is the smallest output cap worth clamping to
	// (default 16).
	ClampMinOutputTokens int64 `yaml:"clamp_min_output_tokens"`
}

// Org is the top scope; it owns teams.
type Org struct {
	ID       string  `yaml:"id"`
	TimeZone string  `yaml:"time_zone"`
	Limits   []Limit `yaml:"limits"`
	Teams    []Team  `yaml:"teams"`
}

// Team owns keys and the team-level budgets finance sets.
type Team struct {
	ID string `yaml:"id"`
	// Plan names a template in Config.Plans whose limits apply to the team.
	Plan   string  `yaml:"plan"`
	Limits []Limit `yaml:"limits"`
	// UserLimits apply to each end user of the team separately.
	UserLimits []Limit `yaml:"user_limits"`
	// ModelLimits apply to the team's use of one model.
	ModelLimits map[string][]Limit `yaml:"model_limits"`
	// Models the team may use; empty means every configured model.
	Models []string `yaml:"models"`
	Keys   []Key    `yaml:"keys"`
}

// Key is one API key, stored as its SHA-256 hash.
type Key struct {
	ID string `yaml:"id"`
	// Hash is "sha256:<64 hex digits>" of the plain key (tollgate keys new).
	Hash string `yaml:"hash"`
	// Plan names a template in Config.Plans whose limits apply to the key.
	Plan   string  `yaml:"plan"`
	Limits []Limit `yaml:"limits"`
	// Models narrows the team's models for this key.
	Models []string `yaml:"models"`
	// Unlimited keys (admin, on-call) are never refused by a limit; their
	// requests are metered, priced, logged and counted as bypasses.
	Unlimited bool `yaml:"unlimited"`
}

// ShardSlots is how many places each org's sharded limits spread over:
// the largest divisor of every sharded limit's Shards that is at most
// budget.MaxShards (16). Shard i of any limit lives in place i mod
// ShardSlots, and one request's shards (picked by one hash of its id) all
// fall in the same place, so the request still reserves its shards in one
// atomic step. 1 when no limit is sharded, or when the counts share no
// divisor above 1 (shards: 8 and 12 spread over 4; 16 and 1024 over 16).
func (c *Config) ShardSlots() int64 {
	g := int64(0)
	add := func(ls []Limit) {
		for _, l := range ls {
			if l.Shards > 1 {
				a, b := g, l.Shards
				for b != 0 {
					a, b = b, a%b
				}
				g = a
			}
		}
	}
	for _, ls := range c.Plans {
		add(ls)
	}
	for _, o := range c.Orgs {
		add(o.Limits)
		for _, t := range o.Teams {
			add(t.Limits)
			add(t.UserLimits)
			for _, ls := range t.ModelLimits {
				add(ls)
			}
			for _, k := range t.Keys {
				add(k.Limits)
			}
		}
	}
	for s := min(g, budget.MaxShards); s > 1; s-- {
		if g%s == 0 {
			return s
		}
	}
	return 1
}
