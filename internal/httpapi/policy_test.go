package httpapi

import (
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
)

const policyConfig = `
time_zone: Europe/Paris
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [gpt-4o, "org/model"]}]
models:
  gpt-4o: {encoding: o200k_base, max_output_tokens: 10}
  org/model: {encoding: o200k_base, max_output_tokens: 10}
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

func TestPrincipalLimits(t *testing.T) {
	c, err := config.Parse([]byte(policyConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDirectory(c)
	if err != nil {
		t.Fatal(err)
	}
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
		{"no user, plain model: org, team (plan overridden), key plan, anonymous user bucket", "", "gpt-4o", []string{
			"org:acme:usd-month", "team:acme/ml:rpm@100/1m0s/0", "team:acme/ml:usd-month", "key:acme/k1:rpm@100/1m0s/0", "key:acme/k1:usd-month", "user:acme/ml/-:usd-day"}},
		{"a user with a slash cannot forge another bucket; the model limit applies", "alice/../bob", "org/model", []string{
			"org:acme:usd-month", "team:acme/ml:rpm@100/1m0s/0", "team:acme/ml:usd-month", "key:acme/k1:rpm@100/1m0s/0", "key:acme/k1:usd-month",
			"user:acme/ml/alice%2F..%2Fbob:usd-day", "model:acme/ml/org%2Fmodel:tpm@1000/1m0s/0"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ls := p.Limits(tc.user, tc.model)
			if got := buckets(ls); !slices.Equal(got, tc.want) {
				t.Fatalf("buckets:\n got %q\nwant %q", got, tc.want)
			}
			for _, l := range ls {
				if err := l.Validate(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	ls := p.Limits("", "gpt-4o")
	if ls[2].Amount != 50_000_000 || ls[2].Location.String() != "UTC" {
		t.Errorf("team budget = %d in %v, want the team's own $50 in UTC over the plan's $10", ls[2].Amount, ls[2].Location)
	}
	if ls[0].Location.String() != "Asia/Tokyo" {
		t.Errorf("org budget zone = %v, want the org's Asia/Tokyo", ls[0].Location)
	}
}

func TestDirectoryLookup(t *testing.T) {
	c, err := config.Parse([]byte(`
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, max_output_tokens: 10}}
orgs: [{id: o, teams: [{id: t, keys: [{id: k, hash: "`+HashKey("tg-secret")+`"}]}]}]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDirectory(c)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := d.lookup("tg-secret"); !ok || p.Key != "k" {
		t.Fatalf("lookup of the right key failed")
	}
	for _, k := range []string{"", "tg-secre", "tg-secret ", "TG-SECRET"} {
		if _, ok := d.lookup(k); ok {
			t.Fatalf("lookup(%q) succeeded", k)
		}
	}
}
