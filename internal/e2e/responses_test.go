package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// sequence checks a Responses stream as the SDKs' stream helpers do: the
// events in the API's order, sequence numbers from 0 without a gap, each
// delta inside its item and part, and every done event, the item and the
// final response agreeing with the deltas. It returns the final response.
func sequence(t *testing.T, events []responses.ResponseStreamEventUnion) responses.Response {
	t.Helper()
	var order []string
	var deltas, args strings.Builder
	added, partOpen := false, false
	var final responses.Response
	for i, ev := range events {
		if ev.SequenceNumber != int64(i) {
			t.Fatalf("event %d (%s) has sequence number %d", i, ev.Type, ev.SequenceNumber)
		}
		order = append(order, ev.Type)
		switch ev.Type {
		case "response.output_item.added":
			added = true
		case "response.content_part.added":
			partOpen = added
		case "response.output_text.delta":
			if !partOpen {
				t.Fatalf("a text delta before its item and content part: %v", order)
			}
			deltas.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			if !added {
				t.Fatalf("an arguments delta before its item: %v", order)
			}
			args.WriteString(ev.Delta)
		case "response.output_text.done":
			if ev.Text != deltas.String() {
				t.Fatalf("output_text.done %q, deltas %q", ev.Text, deltas.String())
			}
		case "response.content_part.done":
			if ev.Part.Text != deltas.String() {
				t.Fatalf("content_part.done %q, deltas %q", ev.Part.Text, deltas.String())
			}
		case "response.function_call_arguments.done":
			if ev.Arguments != args.String() {
				t.Fatalf("function_call_arguments.done %q, deltas %q", ev.Arguments, args.String())
			}
		case "response.output_item.done":
			it := ev.Item
			if it.Type == "message" && (len(it.Content) != 1 || it.Content[0].Text != deltas.String()) ||
				it.Type == "function_call" && it.Arguments.OfString != args.String() {
				t.Fatalf("output_item.done %+v, deltas %q %q", it, deltas.String(), args.String())
			}
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added"}
	if len(order) < 5 || strings.Join(order[:3], " ") != strings.Join(want, " ") ||
		order[len(order)-2] != "response.output_item.done" || final.ID == "" {
		t.Fatalf("event order %v", order)
	}
	return final
}

// The simulated Responses API, through the gateway, streams the API's full
// event sequence — for text, a function call and JSON-schema output — and
// each final response agrees with what was streamed.
func TestResponsesStreamTheFullSequence(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	c := h.client()
	run := func(p responses.ResponseNewParams) responses.Response {
		stream := c.Responses.NewStreaming(ctx, p)
		var events []responses.ResponseStreamEventUnion
		for stream.Next() {
			events = append(events, stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		return sequence(t, events)
	}
	text := responses.ResponseNewParams{Model: "test-model", MaxOutputTokens: param.NewOpt[int64](100),
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("Say hello.")}}
	if r := run(text); r.OutputText() == "" || r.Status != "completed" || r.Usage.OutputTokens == 0 {
		t.Fatalf("text: %+v", r)
	}

	tools := text
	tools.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}}
	r := run(tools)
	var call struct{ City string }
	if len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Output[0].Name != "get_weather" ||
		json.Unmarshal([]byte(r.Output[0].Arguments.OfString), &call) != nil || call.City == "" {
		t.Fatalf("function call: %+v", r.Output)
	}
	// Its output goes back; the model answers in text.
	result := responses.ResponseInputItemParamOfFunctionCallOutput(`{"sky":"clear"}`)
	result.OfFunctionCallOutput.CallID = param.NewOpt(r.Output[0].CallID)
	tools.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather in Lisbon?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(r.Output[0].Arguments.OfString, r.Output[0].CallID, r.Output[0].Name),
		result}}
	if r := run(tools); r.OutputText() == "" {
		t.Fatalf("after the function's output: %+v", r.Output)
	}

	schema := text
	schema.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
		Name: "greeting", Strict: param.NewOpt(true), Schema: map[string]any{"type": "object", "additionalProperties": false,
			"properties": map[string]any{"greeting": map[string]any{"type": "string"}, "language": map[string]any{"type": "string", "enum": []string{"en", "pt"}}},
			"required":   []string{"greeting", "language"}}}}}
	resp, err := c.Responses.New(ctx, schema)
	var out struct{ Greeting, Language string }
	if err != nil || json.Unmarshal([]byte(resp.OutputText()), &out) != nil || out.Greeting == "" || out.Language != "en" {
		t.Fatalf("json_schema: %v %q", err, resp.OutputText())
	}
	if spent, pending := h.spent(teamMonth); spent != h.reportedCost("test-model") || pending != 0 {
		t.Fatalf("spent %d pending %d, want the reported %d", spent, pending, h.reportedCost("test-model"))
	}
}
