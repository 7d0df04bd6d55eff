package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/go-pdf/fpdf"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

type provided struct {
	model, path string
	in, out     int64
}

// Every provider kind, each model on the path its own API serves it at.
// The prices are µ$ per input and output token.
var providers = []provided{
	{claude, "/v1/messages", 3, 15},
	{"gpt-4o-mini", "/v1/chat/completions", 1, 2},
	{"gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:", 1, 2},
	{"gemini-2.0-flash", "/v1/projects/acme-ai/locations/us-east5/publishers/google/models/gemini-2.0-flash:", 1, 2},
	{vertexClaude, "/v1/projects/acme-ai/locations/us-east5/publishers/anthropic/models/" + vertexClaude + ":", 3, 15},
	{bedrockClaude, "/model/" + bedrockClaude + "/converse", 3, 15},
}

const (
	vertexClaude  = "claude-sonnet-4-5@20250929"
	bedrockClaude = "anthropic.claude-sonnet-4-5-20250929-v1:0"
)

// A gateway in front of every provider kind, all simulated by one server:
// Anthropic, OpenAI, Gemini (API key), Vertex AI (a service account's
// OAuth token; Gemini and Claude) and Bedrock (SigV4). Each client calls
// any model in its own format; the gateway translates the request, the
// answer and the stream.
type mixed struct {
	url    string
	app    *app.App
	sim    *simulated.Server
	ledger *settlements
	mu     sync.Mutex
	paths  map[string]int // upstream requests by path
}

func mixedGateway(t *testing.T) *mixed {
	t.Helper()
	aws := &simulated.AWSCredentials{AccessKeyID: "AKIDSIMULATED", SecretAccessKey: "simulated-secret", Region: "us-east-1"}
	sim, err := simulated.New(simulated.Options{APIKey: "upstream-key", AWS: aws})
	if err != nil {
		t.Fatal(err)
	}
	m := &mixed{sim: sim, paths: map[string]int{}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.paths[r.URL.Path]++
		m.mu.Unlock()
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	account, err := sim.ServiceAccount(up.URL + "/token")
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "vertex.json")
	if err := os.WriteFile(creds, account, 0o600); err != nil {
		t.Fatal(err)
	}
	src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + up.URL + `/v1", api_key: upstream-key, models: [` + claude + `]}
  - {name: openai, base_url: "` + up.URL + `/v1", api_key: upstream-key, models: [gpt-4o-mini]}
  - {name: gemini, kind: gemini, base_url: "` + up.URL + `/v1beta", api_key: upstream-key, models: [gemini-2.5-flash]}
  - {name: vertex, kind: vertex, base_url: "` + up.URL + `/v1", project: acme-ai, location: us-east5,
     credentials_file: "` + creds + `", models: [gemini-2.0-flash, "` + vertexClaude + `"]}
  - {name: bedrock, kind: bedrock, base_url: "` + up.URL + `", region: us-east-1,
     access_key_id: AKIDSIMULATED, secret_access_key: simulated-secret, models: ["` + bedrockClaude + `"]}
models:
`
	for _, p := range providers {
		src += fmt.Sprintf("  %q: {input: \"$%d\", output: \"$%d\", reasoning: \"$%d\"}\n", p.model, p.in, p.out, p.out)
	}
	src += acmeML
	m.url, m.app = apptest.Serve(t, src, nil)
	m.ledger = recordSettlements(m.app)
	return m
}

// settled checks the ledger against the upstreams: spend equals what the
// simulated upstreams reported, priced, to the micro-dollar; every
// settlement is within its reservation; and every model was called on its
// own API's path.
func (m *mixed) settled(t *testing.T, requests int64) {
	t.Helper()
	var want, n int64
	stats := m.sim.Stats().Usage
	for _, p := range providers {
		u := stats[p.model]
		want += p.in*u.PromptTokens + p.out*u.CompletionTokens
		n += u.Requests
	}
	spent, pending := spentNow(t, m.app)
	if spent != want || pending != 0 || n != requests {
		t.Fatalf("spent %d pending %d; the upstreams reported %d requests worth %d µ$, want %d requests", spent, pending, n, want, requests)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for path := range m.paths {
		if path != "/token" && !slices.ContainsFunc(providers, func(p provided) bool {
			return strings.HasPrefix(path, p.path)
		}) {
			t.Fatalf("upstream requests %v: each model must be called in its upstream's own API", m.paths)
		}
	}
	for _, e := range m.ledger.all() {
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

// OpenAI's SDK calls every provider's models: plain, streamed, with tools
// and with a JSON schema, each answer in OpenAI's format.
func TestOpenAIClientCallsEveryProvider(t *testing.T) {
	m := mixedGateway(t)
	c := openai.NewClient(option.WithBaseURL(m.url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	var n int64
	for _, p := range providers {
		t.Run(p.model, func(t *testing.T) { openAIRounds(t, c, p.model); n += 8 })
	}
	m.settled(t, n)
}

// openAIRounds makes eight requests of model in OpenAI's format.
func openAIRounds(t *testing.T, c openai.Client, model string) {
	ask := openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(200),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("Hello, Claude. 你好 🙂")}}
	resp, err := c.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content == "" || resp.Choices[0].FinishReason != "stop" || resp.Usage.PromptTokens == 0 || resp.Model != model {
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
		t.Fatalf("schema answer: %v %+v", err, resp)
	}

	// An image, inline: each wire carries it its own way.
	look := ask
	look.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	look.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.TextContentPart("What is in the picture?"),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: pngDataURL(t, 300, 200)})})}
	resp, err = c.Chat.Completions.New(ctx, look)
	if err != nil || resp.Choices[0].Message.Content == "" || resp.Usage.PromptTokens < 80 {
		var e *openai.Error
		if errors.As(err, &e) {
			t.Fatalf("image answer: %s", e.RawJSON())
		}
		t.Fatalf("image answer: %v %+v", err, resp)
	}

	// A PDF, inline: reserved as its pages, billed as the provider reads it.
	read := look
	read.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{Filename: openai.String("q3.pdf"),
			FileData: openai.String("data:application/pdf;base64," + pdfBase64(t, 3))}),
		openai.TextContentPart("Summarise the report.")})}
	resp, err = c.Chat.Completions.New(ctx, read)
	if err != nil || resp.Choices[0].Message.Content == "" || resp.Usage.PromptTokens < 3*geminiPDFPage {
		t.Fatalf("PDF answer: %v %+v", err, resp)
	}
}

// pdfBase64 is an n-page PDF, in base64.
func pdfBase64(t *testing.T, n int) string {
	doc := fpdf.New("P", "mm", "A4", "")
	doc.SetFont("Helvetica", "", 12)
	for i := range n {
		doc.AddPage()
		doc.MultiCell(180, 6, fmt.Sprintf("Page %d. Revenue rose in every region this quarter; costs fell.", i+1), "", "", false)
	}
	var b bytes.Buffer
	if err := doc.Output(&b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// pngDataURL is a w×h PNG as a data URL.
func pngDataURL(t *testing.T, w, h int) string {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

// Anthropic's SDK calls every provider's models: plain, streamed and with
// tools, each answer in Anthropic's format.
func TestAnthropicClientCallsEveryProvider(t *testing.T) {
	m := mixedGateway(t)
	c := anthropicClient(m.url, 0)
	var n int64
	for _, p := range providers {
		t.Run(p.model, func(t *testing.T) { anthropicRounds(t, c, p.model); n += 6 })
	}
	m.settled(t, n)
}

// anthropicRounds makes six requests of model in Anthropic's format.
func anthropicRounds(t *testing.T, c anthropic.Client, model string) {
	ask := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 200,
		System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello. 你好 🙂"))}}
	msg, err := c.Messages.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.StopReason != "end_turn" || msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		t.Fatalf("answer %+v", msg)
	}

	acc, err := accumulate(t, c.Messages.NewStreaming(ctx, ask))
	if err != nil {
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
	acc, err = accumulate(t, c.Messages.NewStreaming(ctx, tools))
	if err != nil || acc.StopReason != "tool_use" || len(acc.Content) != 1 || !strings.Contains(string(acc.Content[0].Input), `"days"`) {
		t.Fatalf("streamed tool use: %v %+v", err, acc)
	}

	doc := ask
	doc.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(
		anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: pdfBase64(t, 2)}),
		anthropic.NewTextBlock("Summarise the report."))}
	msg, err = c.Messages.New(ctx, doc)
	if err != nil || msg.Content[0].Text == "" || msg.Usage.InputTokens < 2*geminiPDFPage {
		t.Fatalf("PDF answer: %v %+v", err, msg)
	}
}

// geminiPDFPage is the least any provider bills a page of a PDF.
const geminiPDFPage = 560

// count_tokens answers the gateway's bound on the input, for a model of
// any provider, without calling it or reserving: never below what the
// same request is then billed for its input.
func TestCountTokensIsTheGatewaysBound(t *testing.T) {
	m := mixedGateway(t)
	c := anthropicClient(m.url, 0)
	pdf := pdfBase64(t, 2)
	for _, p := range providers {
		t.Run(p.model, func(t *testing.T) {
			msgs := []anthropic.MessageParam{anthropic.NewUserMessage(
				anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: pdf}),
				anthropic.NewTextBlock("Summarise the report, in French. 你好 🙂"))}
			system := []anthropic.TextBlockParam{{Text: "You are terse."}}
			before := m.sim.Stats().Requests
			var raw *http.Response
			count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(p.model), Messages: msgs,
				System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: system}}, aoption.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			if m.sim.Stats().Requests != before || raw.Header.Get("X-Tollgate-Count") != "bound" {
				t.Fatalf("count_tokens reached an upstream (%d requests) or did not say it is a bound (%q)", m.sim.Stats().Requests-before, raw.Header.Get("X-Tollgate-Count"))
			}
			msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(p.model), MaxTokens: 50, Messages: msgs, System: system})
			if err != nil {
				t.Fatal(err)
			}
			if count.InputTokens < msg.Usage.InputTokens {
				t.Fatalf("count_tokens said %d; the request was billed %d input tokens", count.InputTokens, msg.Usage.InputTokens)
			}
		})
	}
	m.settled(t, int64(len(providers)))

	_, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: claude, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
		anthropic.NewDocumentBlock(anthropic.URLPDFSourceParam{URL: "https://example.com/q3.pdf"}))}})
	var e *anthropic.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || !strings.Contains(e.Error(), "messages[0].content[0].source") {
		t.Fatalf("a PDF by URL: %v", err)
	}
}
