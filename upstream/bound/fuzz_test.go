package bound_test

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// FuzzPrepare: no input panics; an accepted request parses again from its
// own forwarded body to the same bound (what is forwarded is what was
// bounded), and encoding/json — a Go upstream's reading, which folds case
// and keeps the last of two names — reads the forwarded body's output
// fields as the gateway did.
func FuzzPrepare(f *testing.F) {
	for _, c := range corpus {
		f.Add(uint8(bound.Chat), []byte(c))
	}
	f.Add(uint8(bound.Completions), []byte(`{"model":"m","prompt":[[1,2],[3]],"max_tokens":3,"best_of":2}`))
	f.Add(uint8(bound.Embeddings), []byte(`{"model":"m","input":["a","b"]}`))
	f.Add(uint8(bound.Chat), []byte(`{"model":"m","max_tokens":1e2,"max_tokens":null,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`))
	f.Add(uint8(bound.Chat), []byte(`{"model":"m","N":3,"\u017ftream":true,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":"low"}}]}]}`))
	f.Add(uint8(bound.Completions), []byte(`{"model":"m","prompt":["a","b",[1,2]],"n":2,"best_of":3,"max_tokens":7}`))
	f.Add(uint8(bound.Chat), []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"prediction":{"type":"content","content":[{"type":"text","text":"abc"}]},"service_tier":"flex"}`))
	f.Add(uint8(bound.Chat), []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"messag\u0065s":[{"role":"user","content":"a longer text than x"}]}`))
	f.Add(uint8(bound.Chat), []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":"low","Detail":"high"}}]}]}`))
	m := model(f, "o200k_base")
	emb := *m
	emb.Embedding, emb.MaxOutputTokens, emb.DefaultOutputTokens = true, 0, 0
	f.Add(uint8(bound.Messages), []byte(`{"model":"m","max_tokens":50,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"tool_result","tool_use_id":"t","content":"42"}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"calc","input":{"x":1}}]}]}`))
	f.Add(uint8(bound.Responses), []byte(`{"model":"m","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","name":"f","arguments":"{}","call_id":"c"},{"type":"function_call_output","call_id":"c","output":"42"}],"tools":[{"type":"function","name":"f","parameters":{}}]}`))
	f.Fuzz(func(t *testing.T, ep uint8, body []byte) {
		e := bound.Endpoint((ep+4)%5 + 1) // a seed's uint8(E) is E (1..5)
		mm := m
		if e == bound.Embeddings {
			mm = &emb
		}
		// The endpoint byte's high part picks a server's quirks: the cap
		// field it honours and how its streams report usage.
		switch q := *mm; (ep / 5) % 3 {
		case 1:
			q.CapField, q.StreamUsage = "max_tokens", "always"
			mm = &q
		case 2:
			q.CapField, q.StreamUsage = "max_tokens", "x_groq"
			mm = &q
		}
		req, err := bound.Parse(e, body, nil)
		if err != nil {
			return
		}
		p, err := req.Prepare(mm, native{})
		if err != nil {
			return
		}
		if !json.Valid(p.Body) {
			t.Fatalf("forwarded body is not JSON: %s", p.Body)
		}
		if p.InputTokens < 0 || p.MaxOutputTokens < 0 || p.MaxOutputTokens > mm.MaxOutputTokens*128*128+int64(len(body)) {
			t.Fatalf("bound out of range: %+v", p)
		}
		again, err := bound.Parse(e, p.Body, nil)
		if err != nil {
			t.Fatalf("forwarded body does not parse: %v", err)
		}
		p2, err := again.Prepare(mm, native{})
		if err != nil {
			t.Fatalf("forwarded body does not prepare: %v", err)
		}
		if p2.InputTokens != p.InputTokens || p2.MaxOutputTokens != p.MaxOutputTokens {
			t.Fatalf("forwarded body bounds %d+%d, the client's %d+%d", p2.InputTokens, p2.MaxOutputTokens, p.InputTokens, p.MaxOutputTokens)
		}
		// A Go upstream's reading of what multiplies the output.
		var tagged struct {
			N                   *int64 `json:"n"`
			BestOf              *int64 `json:"best_of"`
			MaxTokens           *int64 `json:"max_tokens"`
			MaxCompletionTokens *int64 `json:"max_completion_tokens"`
			MaxOutputTokens     *int64 `json:"max_output_tokens"`
		}
		if err := json.Unmarshal(p.Body, &tagged); err != nil {
			return // a value encoding/json cannot take as an int64: the upstream refuses it too
		}
		if p.CapField != "" {
			got := map[string]*int64{"max_tokens": tagged.MaxTokens, "max_completion_tokens": tagged.MaxCompletionTokens, "max_output_tokens": tagged.MaxOutputTokens}[p.CapField]
			if got == nil || *got != p.OutputCap {
				t.Fatalf("a Go upstream reads %s as %v, the bound is %d: %s", p.CapField, got, p.OutputCap, p.Body)
			}
		}
		for _, v := range []*int64{tagged.N, tagged.BestOf} {
			if v != nil && *v > p.Choices {
				t.Fatalf("a Go upstream reads %d choices, the bound %d: %s", *v, p.Choices, p.Body)
			}
		}
	})
}

// capPath is where each provider's wire carries the output cap.
var capPath = map[string]string{"openai": "max_tokens", "anthropic": "max_tokens", "gemini": "generationConfig.maxOutputTokens", "bedrock": "inferenceConfig.maxTokens"}

// notPrompt are keys whose string values are not the model's input.
var notPrompt = map[string]bool{"type": true, "role": true, "media_type": true, "mimeType": true, "data": true, "bytes": true, "format": true,
	"url": true, "id": true, "tool_use_id": true, "toolUseId": true, "tool_call_id": true, "model": true, "status": true, "mode": true,
	"stop": true, "stop_sequences": true, "stopSequences": true, "user": true, "user_id": true, "detail": true, "name": false}

// prompt counts the strings of a translated body that the model reads.
func prompt(m *bound.Model, v gjson.Result, key string) int64 {
	switch {
	case v.IsObject():
		var n int64
		v.ForEach(func(k, val gjson.Result) bool {
			n += prompt(m, val, k.String())
			return true
		})
		return n
	case v.IsArray():
		var n int64
		for _, x := range v.Array() {
			n += prompt(m, x, key)
		}
		return n
	case v.Type == gjson.String && !notPrompt[key]:
		return m.Counter.Count(v.String())
	}
	return 0
}

// FuzzTranslate: a request accepted for an upstream of another wire is
// bounded there: the cap written where that wire reads it is the output
// bound, and every text the model will read is within the input bound.
// (The translated body is the gateway's own writing, read here with gjson
// as a test's view of it.)
func FuzzTranslate(f *testing.F) {
	for _, c := range corpus {
		f.Add(uint8(0), uint8(0), []byte(c))
	}
	f.Add(uint8(1), uint8(1), []byte(`{"model":"m","max_tokens":50,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"calc","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"42"}]}],"tools":[{"name":"calc","description":"adds","input_schema":{"type":"object","properties":{"x":{"type":"number"}}}}]}`))
	f.Add(uint8(0), uint8(2), []byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"y":{"type":"string"}}}}}}`))
	m := model(f, "o200k_base")
	m.TokenRatio = 1.35
	providers := []string{"anthropic", "gemini", "bedrock", "openai"}
	f.Fuzz(func(t *testing.T, client, target uint8, body []byte) {
		ep := []bound.Endpoint{bound.Chat, bound.Messages}[client%2]
		kind := providers[target%4]
		if (kind == "openai" && ep == bound.Chat) || (kind == "anthropic" && ep == bound.Messages) {
			return // the upstream's own wire: not translated
		}
		p, err := upstream.NewProvider(upstream.ProviderConfig{Kind: kind, BaseURL: "https://x.test", APIKey: "k", Region: "us-east-1", SecretKey: "s"})
		if err != nil {
			t.Fatal(err)
		}
		req, err := bound.Parse(ep, body, nil)
		if err != nil {
			return
		}
		prep, err := req.Prepare(m, p)
		if err != nil {
			return
		}
		out := gjson.ParseBytes(prep.Body)
		if !gjson.ValidBytes(prep.Body) {
			t.Fatalf("%s body is not JSON: %s", kind, prep.Body)
		}
		capped := out.Get(capPath[kind])
		if kind == "openai" && !capped.Exists() {
			capped = out.Get("max_completion_tokens") // OpenAI's own models take either
		}
		if got := capped.Int(); got != prep.MaxOutputTokens || got < 1 || got > m.MaxOutputTokens {
			t.Fatalf("%s body caps the output at %d, the bound is %d: %s", kind, got, prep.MaxOutputTokens, prep.Body)
		}
		if n := prompt(m, out, ""); n > prep.InputTokens {
			t.Fatalf("%s body holds %d tokens of text, the input bound is %d: %s", kind, n, prep.InputTokens, prep.Body)
		}
	})
}
