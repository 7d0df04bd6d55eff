package e2e_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Claude Opus 4.7 and later, Sonnet 5 and Haiku 5.5 take images of up to
// 2,576 px (up to 4,787 tokens), where earlier Claudes scale them to 1.15
// megapixels (~1,600). An image bounded at 1,600 on every Claude was
// billed three times that on the newer ones: the bound is now per model.
func TestAClaudeImageIsBoundedAtItsModelsResolution(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 2576, 1600))); err != nil {
		t.Fatal(err)
	}
	img := base64.StdEncoding.EncodeToString(buf.Bytes())
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, err := simulated.New(simulated.Options{APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			up := httptest.NewServer(sim)
			t.Cleanup(up.Close)
			src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + up.URL + `/v1", api_key: k, models: [claude-sonnet-5, claude-sonnet-4-5]}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
			r := serveOn(t, store, src)
			for _, model := range []string{"claude-sonnet-5", "claude-sonnet-4-5"} {
				status, body := callAs(t, testKey, http.MethodPost, r.urls[0]+"/v1/messages", `{"model":"`+model+`","max_tokens":10,"messages":[{"role":"user","content":[`+
					`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+img+`"}},{"type":"text","text":"what is it?"}]}]}`)
				if status != 200 {
					t.Fatalf("%s: %d %s", model, status, body)
				}
			}
			got := r.settled(t, 2)
			billed := sim.Stats().Usage
			for _, e := range got {
				if e.Usage.InputTokens != billed[e.Model].BilledPromptTokens || e.Cost > e.Reserved || e.Usage.Estimated {
					t.Errorf("%s: charged %d µ$ of %d reserved for %d input tokens (the upstream billed %d)",
						e.Model, e.Cost, e.Reserved, e.Usage.InputTokens, billed[e.Model].BilledPromptTokens)
				}
				t.Logf("%s %s: image and text billed %d input tokens, %d reserved tokens", store, e.Model, e.Usage.InputTokens, e.ReservedTokens)
			}
			if n := billed["claude-sonnet-5"].BilledPromptTokens; n < 4000 {
				t.Errorf("the simulated Sonnet 5 billed the image at %d tokens: not a high-resolution model", n)
			}
		})
	}
}
