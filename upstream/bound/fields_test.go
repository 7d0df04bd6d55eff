package bound_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// Every prompt of a completions request gets its own n (best_of) choices.
func TestPromptArraysMultiplyTheOutputBound(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	for _, tc := range []struct {
		desc string
		body string
		want int64
	}{
		{"one string", `{"model":"m","prompt":"a","max_tokens":10,"n":2}`, 20},
		{"strings", `{"model":"m","prompt":["a","b","c"],"max_tokens":10,"n":2}`, 60},
		{"one token array", `{"model":"m","prompt":[1,2,3],"max_tokens":10}`, 10},
		{"token arrays", `{"model":"m","prompt":[[1],[2],[3],[4]],"max_tokens":10,"best_of":3}`, 120},
		{"forty prompts", `{"model":"m","prompt":[` + strings.Repeat(`"x",`, 39) + `"x"],"max_tokens":100}`, 4000},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := prepare(t, m, bound.Completions, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if p.MaxOutputTokens != tc.want {
				t.Fatalf("MaxOutputTokens = %d, want %d", p.MaxOutputTokens, tc.want)
			}
		})
	}
}

// An image is never free: a model with no image bound refuses images, and
// low detail uses the low figure only where the model has one.
func TestImagesAreBounded(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	text := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`
	img := func(detail string) string {
		return `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"` + detail + `"}}]}]}`
	}
	base, err := prepare(t, m, bound.Chat, text)
	if err != nil {
		t.Fatal(err)
	}
	for detail, want := range map[string]int64{"high": m.ImageTokens, "auto": m.ImageTokens, "low": m.ImageTokensLow, "original": m.ImageTokens} {
		p, err := prepare(t, m, bound.Chat, img(detail))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.InputTokens - base.InputTokens; got != want {
			t.Errorf("detail %s: the image counts %d, want %d", detail, got, want)
		}
	}
	none := *m
	none.ImageTokens, none.ImageTokensLow = 0, 0
	for _, tc := range []struct {
		ep         bound.Endpoint
		body, part string
	}{
		{bound.Chat, img("low"), "messages[0].content[1]"},
		{bound.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}`, "messages[0].content[0]"},
		{bound.Responses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x"}]}]}`, "input[0].content[0]"},
	} {
		_, err := prepare(t, &none, tc.ep, tc.body)
		if re := refusal(t, err, tc.part); !strings.Contains(re.Message, "image_tokens") {
			t.Errorf("%v: %s does not name image_tokens", tc.ep, re.Message)
		}
	}
}

// Fields that bill outside the price table are refused, each by name.
func TestUnboundedFieldsAreRefused(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	msgs := `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct {
		ep          bound.Endpoint
		body, param string
	}{
		{bound.Chat, `{"model":"m",` + msgs + `,"service_tier":"priority"}`, "service_tier"},
		{bound.Chat, `{"model":"m",` + msgs + `,"service_tier":"scale"}`, "service_tier"},
		{bound.Responses, `{"model":"m","input":"x","service_tier":"priority"}`, "service_tier"},
		{bound.Chat, `{"model":"m",` + msgs + `,"modalities":["text","audio"]}`, "audio"},
		{bound.Chat, `{"model":"m",` + msgs + `,"audio":{"voice":"alloy","format":"wav"}}`, "audio"},
		{bound.Chat, `{"model":"m",` + msgs + `,"web_search_options":{}}`, "web_search_options"},
		{bound.Chat, `{"model":"m",` + msgs + `,"tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","audio":{"id":"audio_1"}}]}`, "messages[1].audio"},
		{bound.Messages, `{"model":"m","max_tokens":5,` + msgs + `,"tools":[{"name":"f","input_schema":{}},{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`, "tools[1].type"},
		{bound.Messages, `{"model":"m","max_tokens":5,` + msgs + `,"mcp_servers":[{"type":"url","url":"https://x"}]}`, "mcp_servers"},
		{bound.Messages, `{"model":"m","max_tokens":5,` + msgs + `,"container":"c_1"}`, "container"},
		{bound.Messages, `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"2h"}}],` + msgs + `}`, "system[0].cache_control.ttl"},
		{bound.Responses, `{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{bound.Responses, `{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{bound.Responses, `{"model":"m","input":"x","background":true}`, "background"},
		{bound.Responses, `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type"},
	} {
		_, err := prepare(t, m, tc.ep, tc.body)
		refusal(t, err, tc.param)
	}
	for _, ok := range []string{
		`{"model":"m",` + msgs + `,"service_tier":"auto","modalities":["text"],"audio":null,"web_search_options":null}`,
		`{"model":"m",` + msgs + `,"service_tier":"flex"}`,
	} {
		if _, err := prepare(t, m, bound.Chat, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// A predicted output's rejected tokens bill as output on top of the cap.
func TestPredictionAddsToTheOutputBound(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	for _, content := range []string{`"one two three four"`, `[{"type":"text","text":"one two "},{"type":"text","text":"three four"}]`} {
		p, err := prepare(t, m, bound.Chat, `{"model":"m","max_completion_tokens":10,"messages":[{"role":"user","content":"x"}],"prediction":{"type":"content","content":`+content+`}}`)
		if err != nil {
			t.Fatal(err)
		}
		if p.MaxOutputTokens < 10+m.Counter.Count("one two three four") {
			t.Fatalf("%s: MaxOutputTokens = %d, below the cap and the prediction", content, p.MaxOutputTokens)
		}
	}
}

// Anthropic expands tools at the provider: the bound adds the tool system
// prompt and each schema-less client tool.
func TestAnthropicToolsAddTheirPrompt(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	a, err := prepare(t, m, bound.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := prepare(t, m, bound.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"bash_20250124","name":"bash"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if b.InputTokens-a.InputTokens < 346+245 {
		t.Fatalf("a bash tool adds %d input tokens, below Anthropic's 346 + 245", b.InputTokens-a.InputTokens)
	}
}

// A name sent twice in one object is refused at any depth, with its path:
// servers keep the last of two where first-match readers keep the first,
// so the gateway could bound one request and forward another.
func TestDuplicateNamesAreRefusedAtAnyDepth(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	for _, tc := range []struct {
		desc  string
		ep    bound.Endpoint
		body  string
		param string
	}{
		{"a top-level cap", bound.Chat, `{"model":"m","max_tokens":10,"max_tokens":4000,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"an escaped top-level name", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"messag\u0065s":[{"role":"user","content":"longer"}]}`, "messages"},
		{"image detail", bound.Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":"low","detail":"high"}}]}]}`, "messages[0].content[0].image_url.detail"},
		{"a tool's type", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","type":"web_search","function":{"name":"f"}}]}`, "tools[0].type"},
		{"an Anthropic tool's type", bound.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","type":"web_search_20250305","name":"w"}]}`, "tools[0].type"},
		{"a prediction's content", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"prediction":{"type":"content","content":"a","content":"` + strings.Repeat("long ", 500) + `"}}`, "prediction.content"},
		{"inside a tool's schema", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","type":"array"}}}]}`, "tools[0].function.parameters.type"},
		{"inside metadata", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"metadata":{"a":"1","a":"2"}}`, "metadata.a"},
		{"a responses input part", bound.Responses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"u","detail":"low","detail":"high"}]}]}`, "input[0].content[0].detail"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := prepare(t, m, tc.ep, tc.body)
			if re := refusal(t, err, tc.param); !strings.Contains(re.Message, "twice") {
				t.Fatalf("%s does not say the name is sent twice", re.Message)
			}
		})
	}
}

// A field the gateway does not know is refused with its path, whatever
// its case or escape: a Go server folds "Detail" to detail, and any server
// may act on a field the gateway skipped.
func TestUnknownFieldsAreRefused(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	for _, tc := range []struct {
		desc  string
		ep    bound.Endpoint
		body  string
		param string
	}{
		{"upper-case N", bound.Chat, `{"model":"m","N":128,"messages":[{"role":"user","content":"x"}]}`, "N"},
		{"mixed-case stream", bound.Chat, `{"model":"m","StrEam":true,"messages":[{"role":"user","content":"x"}]}`, "StrEam"},
		{"long s", bound.Chat, `{"model":"m","ſtream":true,"messages":[{"role":"user","content":"x"}]}`, "ſtream"},
		{"escaped long s", bound.Chat, `{"model":"m","\u017ftream":true,"messages":[{"role":"user","content":"x"}]}`, "ſtream"},
		{"a second model", bound.Chat, `{"model":"cheap","Model":"dear","messages":[{"role":"user","content":"x"}]}`, "Model"},
		{"kelvin sign", bound.Messages, `{"model":"m","max_tokens":5,"max_to\u212aens":99999,"messages":[{"role":"user","content":"x"}]}`, "max_to\u212aens"},
		{"stream options", bound.Chat, `{"model":"m","stream":true,"stream_options":{"Include_Usage":false},"messages":[{"role":"user","content":"x"}]}`, "stream_options.Include_Usage"},
		{"message content", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x","Content":"a much longer text"}]}`, "messages[0].Content"},
		{"content part", bound.Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"","TEXT":"long"}]}]}`, "messages[0].content[0].TEXT"},
		{"image detail", bound.Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","Detail":"high"}}]}]}`, "messages[0].content[0].image_url.Detail"},
		{"a part-level detail on chat", bound.Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","detail":"low","image_url":{"url":"u"}}]}]}`, "messages[0].content[0].detail"},
		{"completions best_of", bound.Completions, `{"model":"m","prompt":"x","Best_Of":20}`, "Best_Of"},
		{"anthropic block", bound.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"Type":"document","type":"text","text":"x"}]}]}`, "messages[0].content[0].Type"},
		{"anthropic tool result", bound.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","Text":"x"}]}]}]}`, "messages[0].content[0].content[0].Text"},
		{"anthropic system", bound.Messages, `{"model":"m","max_tokens":5,"system":[{"type":"text","TexT":"x"}],"messages":[{"role":"user","content":"x"}]}`, "system[0].TexT"},
		{"anthropic fast mode", bound.Messages, `{"model":"m","max_tokens":5,"speed":"fast","messages":[{"role":"user","content":"x"}]}`, "speed"},
		{"anthropic region", bound.Messages, `{"model":"m","max_tokens":5,"inference_geo":"us","messages":[{"role":"user","content":"x"}]}`, "inference_geo"},
		{"openrouter plugins", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"plugins":[{"id":"web"}]}`, "plugins"},
		{"openrouter fallbacks", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"models":["a","b"]}`, "models"},
		{"xai live search", bound.Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"search_parameters":{"mode":"on"}}`, "search_parameters"},
		{"hosted tool type", bound.Responses, `{"model":"m","input":"x","tools":[{"TYPE":"web_search"}]}`, "tools[0].TYPE"},
		{"responses cap", bound.Responses, `{"model":"m","input":"x","Max_Output_Tokens":99999}`, "Max_Output_Tokens"},
		{"embeddings input", bound.Embeddings, `{"model":"m","input":"x","INPUT":["a","b"]}`, "INPUT"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			mm := *m
			if tc.ep == bound.Embeddings {
				mm.Embedding = true
			}
			_, err := prepare(t, &mm, tc.ep, tc.body)
			refusal(t, err, tc.param)
		})
	}
}

// Names the gateway does not read are the client's business inside the
// values it counts whole as text: a tool's parameter names, a schema's
// properties, metadata, an assistant's tool calls.
func TestNamesInsideCountedValuesPass(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"N":{"type":"string"},"Stream":{"type":"boolean"}}}}}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"properties":{"Model":{"type":"string"}}}}}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"metadata":{"Stream":"yes","N":"1"}}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"},"Extra":1}]}]}`,
	} {
		if _, err := prepare(t, m, bound.Chat, body); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// An upstream's operator lets named top-level fields and betas pass
// unread; nothing else passes, and a field passed on one upstream is still
// refused on another.
func TestPassFieldsAndBetas(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	body := `{"model":"m","max_tokens":5,"top_k":40,"messages":[{"role":"user","content":"x"}],"diagnostics":{"level":2}}`
	req, err := bound.Parse(bound.Messages, []byte(body), map[string][]string{"Anthropic-Beta": {"advisor-tool-2026-03-01, prompt-caching-2024-07-31"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = req.Prepare(m, native{})
	if re := refusal(t, err, "diagnostics"); !strings.Contains(re.Message, "pass_fields") {
		t.Fatalf("%s does not say how to let it pass", re.Message)
	}
	passing := *m
	passing.Pass = &bound.Pass{Fields: []string{"diagnostics"}}
	_, err = req.Prepare(&passing, native{})
	if re := refusal(t, err, "anthropic-beta"); !strings.Contains(re.Message, "advisor-tool-2026-03-01") || !strings.Contains(re.Message, "pass_betas") {
		t.Fatalf("%s does not name the beta and how to pass it", re.Message)
	}
	passing.Pass.Betas = []string{"advisor-tool-2026-03-01"}
	p, err := req.Prepare(&passing, native{})
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Body) != body || p.Betas != "advisor-tool-2026-03-01,prompt-caching-2024-07-31" {
		t.Fatalf("forwarded %s with betas %q", p.Body, p.Betas)
	}
	for _, beta := range []string{"fast-mode-2026-02-01", "mcp-client-2025-04-04", "no-such-beta"} {
		req, err := bound.Parse(bound.Messages, []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`), map[string][]string{"Anthropic-Beta": {beta}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = req.Prepare(m, native{})
		refusal(t, err, "anthropic-beta")
	}
}
