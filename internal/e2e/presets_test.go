package e2e_test

import (
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// OpenAI-compatible providers that differ from OpenAI, each simulated in
// its dialect: Mistral honours max_tokens only, refuses stream_options and
// ends every stream with its usage; Groq honours max_tokens only and
// reports a stream's usage in x_groq. Their replies are 300 tokens unless
// capped, so a cap written where the server does not read it would pass the
// reservation. The OpenAI SDK's requests — capped with
// max_completion_tokens, streamed with and without usage asked — are
// bounded, answered and settled at the usage reported.
func TestPresetsDialects(t *testing.T) {
	long := func(uint64) int64 { return 300 }
	mistral, mistralURL := simulatedUpstream(t, simulated.Options{APIKey: "k", Dialect: "mistral", ReplyTokens: long})
	groq, groqURL := simulatedUpstream(t, simulated.Options{APIKey: "k", Dialect: "groq", ReplyTokens: long})
	url, a := apptest.Serve(t, `
upstreams:
  - {name: mistral, preset: mistral, base_url: "`+mistralURL+`/v1", api_key: k, models: [mistral-small-latest]}
  - {name: groq, preset: groq, base_url: "`+groqURL+`/v1", api_key: k, models: [llama-3.3-70b-versatile]}
models:
  mistral-small-latest: {input: "$1", output: "$3"}
  llama-3.3-70b-versatile: {input: "$2", output: "$5"}
`+acmeML, nil)
	settled := recordSettlements(a)
	c := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	for _, model := range []string{"mistral-small-latest", "llama-3.3-70b-versatile"} {
		t.Run(model, func(t *testing.T) {
			ask := openai.ChatCompletionNewParams{Model: model, MaxCompletionTokens: openai.Int(40),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}}
			resp, err := c.Chat.Completions.New(ctx, ask)
			if err != nil || resp.Usage.CompletionTokens == 0 || resp.Usage.CompletionTokens > 40 {
				t.Fatalf("plain: %v, usage %+v", err, resp.Usage)
			}
			for _, withUsage := range []bool{true, false} {
				ask.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
				if withUsage {
					ask.StreamOptions.IncludeUsage = param.NewOpt(true)
				}
				stream := c.Chat.Completions.NewStreaming(ctx, ask)
				acc := openai.ChatCompletionAccumulator{}
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				if err := stream.Err(); err != nil || acc.Choices[0].Message.Content == "" {
					t.Fatalf("stream (usage asked: %v): %v", withUsage, err)
				}
			}
		})
	}
	want := map[string][2]int64{"mistral-small-latest": {1, 3}, "llama-3.3-70b-versatile": {2, 5}}
	var cost int64
	for model, sim := range map[string]*simulated.Server{"mistral-small-latest": mistral, "llama-3.3-70b-versatile": groq} {
		u := sim.Stats().Usage[model]
		if u.Requests != 3 || u.BilledCompletionTokens > 3*40 {
			t.Fatalf("%s: %+v: want 3 requests, each within the cap of 40", model, u)
		}
		cost += want[model][0]*u.PromptTokens + want[model][1]*u.CompletionTokens
	}
	spent, pending := spentNow(t, a)
	if spent != cost || pending != 0 {
		t.Fatalf("spent %d pending %d, want the reported %d µ$", spent, pending, cost)
	}
	for _, e := range settled.wait(t, 6) {
		if e.Usage.Estimated || e.Cost > e.Reserved {
			t.Fatalf("entry %s: estimated %v, cost %d of %d reserved", e.Model, e.Usage.Estimated, e.Cost, e.Reserved)
		}
	}
}
