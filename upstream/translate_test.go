package upstream_test

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/upstream"
)

// capPath is where each provider's wire carries the output cap.
var capPath = map[string]string{"openai": "max_tokens", "anthropic": "max_tokens", "gemini": "generationConfig.maxOutputTokens", "bedrock": "inferenceConfig.maxTokens"}

// notPrompt are keys whose string values are not the model's input.
var notPrompt = map[string]bool{"type": true, "role": true, "media_type": true, "mimeType": true, "data": true, "bytes": true, "format": true,
	"url": true, "id": true, "tool_use_id": true, "toolUseId": true, "tool_call_id": true, "model": true, "status": true, "mode": true,
	"stop": true, "stop_sequences": true, "stopSequences": true, "user": true, "user_id": true, "detail": true, "name": false}

// prompt counts the strings of a translated body that the model reads.
func prompt(m *upstream.Model, v gjson.Result, key string) int64 {
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
		ep := []upstream.Endpoint{upstream.Chat, upstream.Messages}[client%2]
		kind := providers[target%4]
		if (kind == "openai" && ep == upstream.Chat) || (kind == "anthropic" && ep == upstream.Messages) {
			return // the upstream's own wire: not translated
		}
		p, err := upstream.NewProvider(upstream.ProviderConfig{Kind: kind, BaseURL: "https://x.test", APIKey: "k", Region: "us-east-1", SecretKey: "s"})
		if err != nil {
			t.Fatal(err)
		}
		req, err := upstream.ParseRequest(ep, body)
		if err != nil {
			return
		}
		prep, err := req.Translate(m, p)
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
