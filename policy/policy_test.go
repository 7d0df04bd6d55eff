package policy

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
)

const policyConfig = `
time_zone: Europe/Paris
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [gpt-4o, "org/model"]}]
models:
  gpt-4o: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}
  org/model: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}
plans:
  pro:
    - {name: rpm, kind: rate, unit: requests, amount: 100}
    - {name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}
orgs:
  - id: acme
    time_zone: Asia/Tokyo
    limits: [{name: usd-month, kind: budget, unit: usd, amount: "$100", period: month}]
    teams:
      - id: ml
        plan: pro
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$50", period: month, time_zone: UTC}]
        user_limits: [{name: usd-day, kind: budget, unit: usd, amount: "$1", period: day}]
        model_limits:
          org/model: [{name: tpm, kind: rate, unit: tokens, amount: 1000}]
        keys:
          - {id: k1, hash: "sha256:0000000000000000000000000000000000000000000000000000000000000001", plan: pro}
`

// directoryOf parses a config and resolves its keys.
func directoryOf(t *testing.T, src string) (*config.Config, *Directory) {
	t.Helper()
	c, err := config.Parse([]byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDirectory(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, d
}

func TestPrincipalLimits(t *testing.T) {
	_, d := directoryOf(t, policyConfig)
	var p *Principal
	for _, v := range d.byHash {
		p = v
	}
	buckets := func(ls []budget.Limit) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Bucket)
		}
		return out
	}
	tests := []struct {
		desc, user, model string
		want              []string
	}{
		{"no user, plain model: org, team (plan overridden), key plan, anonymous user bucket, the spend meters", "", "gpt-4o", []string{
			"org:acme:usd-month", "team:acme/ml:rpm@100/1m0s/0", "team:acme/ml:usd-month", "key:acme/k1:rpm@100/1m0s/0", "key:acme/k1:usd-month", "user:acme/ml/-:usd-day",
			"spend:acme/ml/k1/gpt-4o:spend-day", "spend:acme/ml/k1/gpt-4o:spend-month"}},
		{"a user with a slash cannot forge another bucket; the model limit applies", "alice/../bob", "org/model", []string{
			"org:acme:usd-month", "team:acme/ml:rpm@100/1m0s/0", "team:acme/ml:usd-month", "key:acme/k1:rpm@100/1m0s/0", "key:acme/k1:usd-month",
			"user:acme/ml/alice%2F..%2Fbob:usd-day", "model:acme/ml/org%2Fmodel:tpm@1000/1m0s/0",
			"spend:acme/ml/k1/org%2Fmodel:spend-day", "spend:acme/ml/k1/org%2Fmodel:spend-month"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ls := p.Limits(RequestKey{User: tc.user, Model: tc.model})
			if got := buckets(ls); !slices.Equal(got, tc.want) {
				t.Fatalf("buckets:\n got %q\nwant %q", got, tc.want)
			}
			// The model's limits are compiled once and kept: a second
			// request gets the same, whatever the first did to its copy.
			for i := range ls {
				ls[i].Bucket = "changed"
			}
			if got := buckets(p.Limits(RequestKey{User: tc.user, Model: tc.model})); !slices.Equal(got, tc.want) {
				t.Fatalf("second request's buckets:\n got %q\nwant %q", got, tc.want)
			}
			ls = p.Limits(RequestKey{User: tc.user, Model: tc.model})
			for _, l := range ls {
				if err := l.Validate(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	ls := p.Limits(RequestKey{Model: "gpt-4o"})
	if ls[2].Amount != 50_000_000 || ls[2].Location.String() != "UTC" {
		t.Errorf("team budget = %d in %v, want the team's own $50 in UTC over the plan's $10", ls[2].Amount, ls[2].Location)
	}
	if ls[0].Location.String() != "Asia/Tokyo" {
		t.Errorf("org budget zone = %v, want the org's Asia/Tokyo", ls[0].Location)
	}
}

func TestDirectoryLookup(t *testing.T) {
	_, d := directoryOf(t, `
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
orgs: [{id: o, teams: [{id: t, keys: [{id: k, hash: "`+HashKey("tg-secret")+`"}]}]}]
`)
	if p, ok := d.Lookup("tg-secret"); !ok || p.Key != "k" {
		t.Fatalf("lookup of the right key failed")
	}
	for _, k := range []string{"", "tg-secre", "tg-secret ", "TG-SECRET"} {
		if _, ok := d.Lookup(k); ok {
			t.Fatalf("lookup(%q) succeeded", k)
		}
	}
}

func TestKeyStrategiesEndpointsAndShards(t *testing.T) {
	_, d := directoryOf(t, `
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
orgs:
  - id: o
    teams:
      - id: t
        limits:
          - {name: per-ip, kind: rate, unit: requests, amount: 100, key_by: [ip]}
          - {name: per-user-route, kind: rate, unit: requests, amount: 50, key_by: [user, endpoint]}
          - {name: embeddings-only, kind: rate, unit: requests, amount: 10, endpoints: [/v1/embeddings]}
          - {name: hot, kind: rate, unit: requests, amount: 1000, burst: 100, shards: 4}
        keys: [{id: k, hash: "`+HashKey("tg-k")+`"}]
`)
	p, _ := d.Lookup("tg-k")
	chat := p.Limits(RequestKey{User: "al/ice", Route: "/v1/chat/completions", IP: "203.0.113.9", ID: "req-1"})
	if len(chat) != 3 {
		t.Fatalf("chat gets %d limits, want 3 (the embeddings-only limit does not apply)", len(chat))
	}
	if !strings.HasSuffix(chat[0].Bucket, "|ip=203.0.113.9") || !strings.HasSuffix(chat[1].Bucket, "|user=al%2Fice|endpoint=%2Fv1%2Fchat%2Fcompletions") {
		t.Fatalf("buckets %q %q", chat[0].Bucket, chat[1].Bucket)
	}
	if chat[2].Amount != 250 || chat[2].Burst != 25 || !strings.Contains(chat[2].Bucket, "#") {
		t.Fatalf("a 4-way sharded limit: %+v", chat[2])
	}
	if emb := p.Limits(RequestKey{Route: "/v1/embeddings", ID: "req-2"}); len(emb) != 4 {
		t.Fatalf("embeddings get %d limits, want 4", len(emb))
	}
	shards := map[string]bool{}
	for i := range 200 {
		l := p.Limits(RequestKey{Route: "/v1/chat/completions", ID: "req-" + strconv.Itoa(i)})[2]
		shards[l.Bucket] = true
	}
	if len(shards) != 4 {
		t.Fatalf("200 requests used %d shards, want all 4", len(shards))
	}
}

// The admin API reads and changes budgets through ScopeLimits: it must
// name the very buckets, amounts and calendars requests are charged to —
// the team's own limit over its plan's, the default and per-limit time
// zones — and leave out limits that have no single bucket.
func TestScopeLimitsMatchTheRequestPath(t *testing.T) {
	c, d := directoryOf(t, `
time_zone: Europe/Paris
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
plans:
  pro: [{name: usd-month, kind: budget, unit: usd, amount: "$5", period: month}]
orgs:
  - id: o
    limits: [{name: org-month, kind: budget, unit: usd, amount: "$100", period: month}]
    teams:
      - id: t
        plan: pro
        limits:
          - {name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}
          - {name: usd-day, kind: budget, unit: usd, amount: "$1", period: day, time_zone: America/New_York}
          - {name: per-user-day, kind: budget, unit: usd, amount: "$1", period: day, key_by: [user]}
        keys: [{id: k, hash: "`+HashKey("tg-k")+`"}]
`)
	p, _ := d.Lookup("tg-k")
	charged := p.Limits(RequestKey{User: "u1", Route: "/v1/chat/completions", ID: "r"})
	team, ok := ScopeLimits(c, "o", "t")
	if !ok || len(team) != 2 {
		t.Fatalf("team limits: %+v %v, want usd-month and usd-day", team, ok)
	}
	org, ok := ScopeLimits(c, "o", "")
	if !ok || len(org) != 1 {
		t.Fatalf("org limits: %+v %v", org, ok)
	}
	for _, l := range append(team, org...) {
		i := slices.IndexFunc(charged, func(x budget.Limit) bool { return x.Bucket == l.Bucket })
		if i < 0 || charged[i].Amount != l.Amount || charged[i].Location.String() != l.Location.String() || charged[i].Period != l.Period {
			t.Fatalf("%s: the admin sees %+v, requests are charged to %+v", l.Bucket, l, charged[max(i, 0)])
		}
	}
	if team[0].Amount != int64(10*budget.Dollar) || team[0].Location.String() != "Europe/Paris" || team[1].Location.String() != "America/New_York" {
		t.Fatalf("team limits: %+v", team)
	}
	if _, ok := ScopeLimits(c, "o", "nope"); ok {
		t.Fatal("a team that does not exist was found")
	}
	if _, ok := ScopeLimits(c, "nope", ""); ok {
		t.Fatal("an org that does not exist was found")
	}
}

// Sharded limits spread over config.ShardSlots places: one request's
// shards all fall in one (so the Redis store reserves them in one atomic
// call, in one cluster slot), and requests use every place.
func TestShardedLimitsOfARequestShareOnePlace(t *testing.T) {
	c, d := directoryOf(t, `
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
orgs:
  - id: o
    limits:
      - {name: org-hot, kind: rate, unit: requests, amount: 10000, shards: 12}
    teams:
      - id: t
        limits:
          - {name: team-hot, kind: rate, unit: tokens, amount: 100000, shards: 8}
          - {name: budget, kind: budget, unit: usd, amount: "$10", period: month}
        keys: [{id: k, hash: "`+HashKey("tg-k")+`"}]
`)
	if got := c.ShardSlots(); got != 4 {
		t.Fatalf("ShardSlots of shards 12 and 8 = %d, want 4", got)
	}
	p, _ := d.Lookup("tg-k")
	places := map[int]bool{}
	for i := range 200 {
		ls := p.Limits(RequestKey{Route: "/v1/chat/completions", ID: "req-" + strconv.Itoa(i)})
		shard := -1
		for _, l := range ls {
			if !strings.Contains(l.Bucket, "#") {
				if l.Shard != 0 {
					t.Fatalf("an unsharded limit has a shard: %+v", l)
				}
				continue
			}
			n, _ := strconv.Atoi(l.Bucket[strings.LastIndexByte(l.Bucket, '#')+1:])
			if l.Shard != n%4+1 {
				t.Fatalf("bucket %s is in shard %d, want %d", l.Bucket, l.Shard, n%4+1)
			}
			if shard >= 0 && l.Shard != shard {
				t.Fatalf("one request's sharded limits in shards %d and %d", shard, l.Shard)
			}
			shard = l.Shard
		}
		places[shard] = true
	}
	if len(places) != 4 {
		t.Fatalf("200 requests used %d places, want 4", len(places))
	}
}

// TestLimitsMadeOnceAreTheResolvedOnes: a key's limits made once per model
// (where none reads anything of the request but its model) are the limits
// resolved for each request, for requests of every user, route, address,
// id and model, asked more than once — with limits that read the request
// (key_by, endpoints, shards, user limits) and without.
func TestLimitsMadeOnceAreTheResolvedOnes(t *testing.T) {
	for _, extra := range []string{
		"", "{name: per-ip, kind: rate, unit: requests, amount: 100, key_by: [ip]}",
		"{name: per-route, kind: rate, unit: requests, amount: 50, key_by: [endpoint]}",
		"{name: emb, kind: rate, unit: requests, amount: 10, endpoints: [/v1/embeddings]}",
		"{name: hot, kind: rate, unit: requests, amount: 1000, shards: 4}",
	} {
		for _, users := range []string{"", "\n        user_limits: [{name: usd-day, kind: budget, unit: usd, amount: \"$1\", period: day}]"} {
			_, d := directoryOf(t, `
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m, n]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}, n: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
orgs:
  - id: o
    limits: [{name: usd-month, kind: budget, unit: usd, amount: "$100", period: month}]
    teams:
      - id: t
        limits: [{name: rpm, kind: rate, unit: requests, amount: 100}, `+extra+`]`+users+`
        model_limits: {n: [{name: tpm, kind: rate, unit: tokens, amount: 1000}]}
        keys: [{id: k, hash: "`+HashKey("tg-k")+`"}]
`)
			p, _ := d.Lookup("tg-k")
			for i := range 300 {
				k := RequestKey{User: []string{"", "ann", "bob"}[i%3], Model: []string{"m", "n", ""}[i%7%3], Route: []string{"/v1/chat/completions", "/v1/embeddings"}[i%2],
					IP: "203.0.113." + strconv.Itoa(i%5), ID: "req-" + strconv.Itoa(i)}
				if got, want := p.Limits(k), p.resolve(k); !slices.Equal(got, want) {
					t.Fatalf("limits %q, user limits %v, request %+v: made once %+v, resolved %+v", extra, users != "", k, got, want)
				}
			}
		}
	}
}
