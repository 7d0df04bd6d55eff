package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// A gateway whose two upstreams speak different wires: Claude behind an
// Anthropic upstream, gpt-4o-mini behind an OpenAI one, both simulated.
// Each client calls either model in its own format; the gateway
// translates the request, the answer and the stream.
type mixed struct {
	url     string
	app     *app.App
	sim     *simulated.Server
	mu      sync.Mutex
	entries []budget.Entry
	paths   map[string]int // upstream requests by model and path
}

func mixedGateway(t *testing.T) *mixed {
	t.Helper()
	sim, err := simulated.New(simulated.Options{APIKey: "upstream-key"})
	if err != nil {
		t.Fatal(err)
	}
	m := &mixed{sim: sim, paths: map[string]int{}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.paths[gjson.GetBytes(body, "model").String()+" "+r.URL.Path]++
		m.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + up.URL + `/v1", api_key: upstream-key, models: [` + claude + `]}
  - {name: openai, base_url: "` + up.URL + `/v1", api_key: upstream-key, models: [gpt-4o-mini]}
models:
  ` + claude + `: {input: "$3", output: "$15"}
  gpt-4o-mini:   {input: "$1", output: "$2"}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
	m.url, m.app = apptest.Serve(t, src, nil)
	a := m.app
	a.Gateway().OnSettle(func(e budget.Entry) { m.mu.Lock(); m.entries = append(m.entries, e); m.mu.Unlock() })
	return m
}

// settled checks the ledger against the upstream: spend equals what the
// simulated upstreams reported, priced, to the micro-dollar, and every
// settlement is within its reservation.
func (m *mixed) settled(t *testing.T, requests int64) {
	t.Helper()
	c, o := m.sim.Stats().Usage[claude], m.sim.Stats().Usage["gpt-4o-mini"]
	want := 3*c.PromptTokens + 15*c.CompletionTokens + o.PromptTokens + 2*o.CompletionTokens
	spent, pending := spentNow(t, m.app)
	if spent != want || pending != 0 || c.Requests+o.Requests != requests {
		t.Fatalf("spent %d pending %d; the upstreams reported %d + %d requests worth %d µ$", spent, pending, c.Requests, o.Requests, want)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.paths {
		if key != claude+" /v1/messages" && key != "gpt-4o-mini /v1/chat/completions" {
			t.Fatalf("upstream requests %v: each model must be called in its upstream's own API", m.paths)
		}
	}
	for _, e := range m.entries {
		if e.Usage.Estimated || e.Cost > e.Reserved {
			t.Fatalf("entry %+v: the usage must be reported, and within the reservation", e)
		}
	}
}

var weather = shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: param.NewOpt("The weather in a city"),
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer", "minimum": 1}}, "required": []string{"city", "days"}},
}

// OpenAI's SDK calls Claude: plain, streamed, with tools and with a JSON
// schema, each answer in OpenAI's format.
func TestOpenAIClientCallsClaude(t *testing.T) {
	m := mixedGateway(t)
	c := openai.NewClient(option.WithBaseURL(m.url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	ask := openai.ChatCompletionNewParams{Model: claude, MaxTokens: openai.Int(200),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("Hello, Claude. 你好 🙂")}}
	resp, err := c.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content == "" || resp.Choices[0].FinishReason != "stop" || resp.Usage.PromptTokens == 0 || resp.Model != claude {
		t.Fatalf("answer %+v", resp)
	}

	ask.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, ask)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content == "" || acc.Usage.CompletionTokens == 0 {
		t.Fatalf("streamed answer %+v", acc.ChatCompletion)
	}

	tools := ask
	tools.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	tools.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Lisbon for 3 days?")}
	tools.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(weather)}
	resp, err = c.Chat.Completions.New(ctx, tools)
	if err != nil {
		t.Fatal(err)
	}
	call := resp.Choices[0].Message.ToolCalls
	var args struct {
		City string `json:"city"`
		Days int    `json:"days"`
	}
	if resp.Choices[0].FinishReason != "tool_calls" || len(call) != 1 || call[0].Function.Name != "get_weather" ||
		json.Unmarshal([]byte(call[0].Function.Arguments), &args) != nil || args.City == "" || args.Days < 1 {
		t.Fatalf("tool answer %+v", resp.Choices[0])
	}
	// The tool's result goes back; the model answers in text.
	tools.Messages = append(tools.Messages, resp.Choices[0].Message.ToParam(), openai.ToolMessage(`{"sky":"clear"}`, call[0].ID))
	resp, err = c.Chat.Completions.New(ctx, tools)
	if err != nil || resp.Choices[0].Message.Content == "" || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("after the tool's result: %v %+v", err, resp)
	}
	// Streamed, the call arrives in pieces the accumulator puts together.
	tools.Messages = tools.Messages[:1]
	stream = c.Chat.Completions.NewStreaming(ctx, tools)
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices[0].Message.ToolCalls) != 1 ||
		json.Unmarshal([]byte(acc.Choices[0].Message.ToolCalls[0].Function.Arguments), &args) != nil || args.City == "" {
		t.Fatalf("streamed tool call: %v %+v", err, acc.Choices)
	}

	schema := ask
	schema.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	schema.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "forecast", Strict: param.NewOpt(true),
			Schema: map[string]any{"type": "object", "properties": map[string]any{"summary": map[string]any{"type": "string"}, "high": map[string]any{"type": "number"}},
				"required": []string{"summary", "high"}, "additionalProperties": false}}}}
	resp, err = c.Chat.Completions.New(ctx, schema)
	var out struct {
		Summary string   `json:"summary"`
		High    *float64 `json:"high"`
	}
	if err != nil || json.Unmarshal([]byte(resp.Choices[0].Message.Content), &out) != nil || out.Summary == "" || out.High == nil {
		t.Fatalf("schema answer: %v %q", err, resp.Choices[0].Message.Content)
	}
	m.settled(t, 6)
}

// Anthropic's SDK calls an OpenAI model: plain, streamed and with tools,
// each answer in Anthropic's format.
func TestAnthropicClientCallsOpenAI(t *testing.T) {
	m := mixedGateway(t)
	c := anthropicClient(m.url, 0)
	ask := anthropic.MessageNewParams{Model: "gpt-4o-mini", MaxTokens: 200,
		System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello. 你好 🙂"))}}
	msg, err := c.Messages.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.StopReason != "end_turn" || msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		t.Fatalf("answer %+v", msg)
	}

	stream := c.Messages.NewStreaming(ctx, ask)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) == 0 || acc.Content[0].Text == "" || acc.Usage.OutputTokens == 0 || acc.Usage.InputTokens == 0 {
		t.Fatalf("streamed answer %+v", acc)
	}

	tools := ask
	tools.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Lisbon for 3 days?"))}
	tools.Tools = []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer", "minimum": 1}},
		Required:   []string{"city", "days"}}, "get_weather")}
	msg, err = c.Messages.New(ctx, tools)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "get_weather" ||
		!strings.Contains(string(msg.Content[0].Input), `"city"`) {
		t.Fatalf("tool answer %+v", msg)
	}
	tools.Messages = append(tools.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[0].ID, `{"sky":"clear"}`, false)))
	msg, err = c.Messages.New(ctx, tools)
	if err != nil || msg.StopReason != "end_turn" || msg.Content[0].Text == "" {
		t.Fatalf("after the tool's result: %v %+v", err, msg)
	}
	tools.Messages = tools.Messages[:1]
	stream = c.Messages.NewStreaming(ctx, tools)
	acc = anthropic.Message{}
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || acc.StopReason != "tool_use" || len(acc.Content) != 1 || !strings.Contains(string(acc.Content[0].Input), `"days"`) {
		t.Fatalf("streamed tool use: %v %+v", err, acc)
	}
	m.settled(t, 5)
}
