package upstream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream"
)

func prepare(t *testing.T, m *upstream.Model, ep upstream.Endpoint, body string) (*upstream.Prepared, error) {
	t.Helper()
	req, err := upstream.ParseRequest(ep, []byte(body))
	if err != nil {
		return nil, err
	}
	return req.Prepare(m)
}

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
			p, err := prepare(t, m, upstream.Completions, tc.body)
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
	base, err := prepare(t, m, upstream.Chat, text)
	if err != nil {
		t.Fatal(err)
	}
	for detail, want := range map[string]int64{"high": m.ImageTokens, "auto": m.ImageTokens, "low": m.ImageTokensLow} {
		p, err := prepare(t, m, upstream.Chat, img(detail))
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
		ep         upstream.Endpoint
		body, part string
	}{
		{upstream.Chat, img("low"), "messages[0].content[1]"},
		{upstream.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AAAA"}}]}]}`, "messages[0].content[0]"},
		{upstream.Responses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x"}]}]}`, "input[0].content[0]"},
	} {
		_, err := prepare(t, &none, tc.ep, tc.body)
		var re *upstream.RequestError
		if !errors.As(err, &re) || re.Param != tc.part || !strings.Contains(re.Message, "image_tokens") {
			t.Errorf("%v: err = %v, want a refusal of %s naming image_tokens", tc.ep, err, tc.part)
		}
	}
}

// Fields that bill outside the price table are refused, each by name.
func TestUnboundedFieldsAreRefused(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	msgs := `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct {
		ep          upstream.Endpoint
		body, param string
	}{
		{upstream.Chat, `{"model":"m",` + msgs + `,"service_tier":"priority"}`, "service_tier"},
		{upstream.Responses, `{"model":"m","input":"x","service_tier":"priority"}`, "service_tier"},
		{upstream.Chat, `{"model":"m",` + msgs + `,"modalities":["text","audio"]}`, "audio"},
		{upstream.Chat, `{"model":"m",` + msgs + `,"audio":{"voice":"alloy","format":"wav"}}`, "audio"},
		{upstream.Chat, `{"model":"m",` + msgs + `,"web_search_options":{}}`, "web_search_options"},
		{upstream.Chat, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","audio":{"id":"audio_1"}}]}`, "messages[1].audio"},
		{upstream.Messages, `{"model":"m","max_tokens":5,` + msgs + `,"tools":[{"name":"f","input_schema":{}},{"type":"web_search_20250305","name":"web_search"}]}`, "tools[1].type"},
		{upstream.Messages, `{"model":"m","max_tokens":5,` + msgs + `,"mcp_servers":[{"type":"url","url":"https://x"}]}`, "mcp_servers"},
		{upstream.Messages, `{"model":"m","max_tokens":5,` + msgs + `,"container":"c_1"}`, "container"},
	} {
		_, err := prepare(t, m, tc.ep, tc.body)
		var re *upstream.RequestError
		if !errors.As(err, &re) || re.Param != tc.param || !strings.Contains(re.Message, tc.param) {
			t.Errorf("%s: err = %v, want a refusal naming %s", tc.body, err, tc.param)
		}
	}
	for _, ok := range []string{
		`{"model":"m",` + msgs + `,"service_tier":"auto","modalities":["text"],"audio":null,"web_search_options":null}`,
		`{"model":"m",` + msgs + `,"service_tier":"flex"}`,
	} {
		if _, err := prepare(t, m, upstream.Chat, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// A predicted output's rejected tokens bill as output on top of the cap.
func TestPredictionAddsToTheOutputBound(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	p, err := prepare(t, m, upstream.Chat, `{"model":"m","max_completion_tokens":10,"messages":[{"role":"user","content":"x"}],"prediction":{"type":"content","content":"one two three four"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := 10 + m.Counter.Count("one two three four"); p.MaxOutputTokens != want {
		t.Fatalf("MaxOutputTokens = %d, want %d", p.MaxOutputTokens, want)
	}
}

// Anthropic expands tools at the provider: the bound adds the tool system
// prompt and each schema-less client tool.
func TestAnthropicToolsAddTheirPrompt(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	bare := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`
	with := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"bash_20250124","name":"bash"}]}`
	a, err := prepare(t, m, upstream.Messages, bare)
	if err != nil {
		t.Fatal(err)
	}
	b, err := prepare(t, m, upstream.Messages, with)
	if err != nil {
		t.Fatal(err)
	}
	if b.InputTokens-a.InputTokens < 346+245 {
		t.Fatalf("a bash tool adds %d input tokens, below Anthropic's 346 + 245", b.InputTokens-a.InputTokens)
	}
}

// A key sent twice is forwarded once, with its last value, in its last
// place; the keys the gateway adds come after the client's. The same
// whether the body has a few members (compared pairwise) or many (indexed).
func TestForwardedBodyKeepsTheLastOfARepeatedKey(t *testing.T) {
	t.Parallel()
	m := model(t, "o200k_base")
	for _, filler := range []int{0, 3, 14, 15, 16, 40} {
		var extra strings.Builder
		var want strings.Builder
		for i := range filler {
			fmt.Fprintf(&extra, `"x%d":%d,`, i, i)
		}
		body := `{"model":"m","user":"a",` + extra.String() + `"stream":true,"user":"b","messages":[{"role":"user","content":"hi"}],"model":"m"}`
		want.WriteString(`{` + extra.String() + `"stream":true,"user":"b","messages":[{"role":"user","content":"hi"}],"model":"m",`)
		p, err := prepare(t, m, upstream.Chat, body)
		if err != nil {
			t.Fatalf("%d fillers: %v", filler, err)
		}
		got := string(p.Body)
		if !strings.HasPrefix(got, want.String()) || strings.Count(got, `"user":`) != 1 || strings.Count(got, `"model":`) != 1 ||
			!strings.Contains(got, `"stream_options":{"include_usage":true}`) {
			t.Errorf("%d fillers: forwarded %s", filler, got)
		}
	}
}
