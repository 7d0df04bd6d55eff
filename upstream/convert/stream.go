package convert

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// EventKind says what an Event carries.
type EventKind uint8

const (
	EvStart     EventKind = iota + 1 // ID, Model
	EvText                           // Text
	EvThinking                       // Text
	EvToolStart                      // Index, Call (its ID and Name)
	EvToolArgs                       // Index, Text: a piece of the arguments' JSON
	EvStop                           // Stop, StopSequence
	EvUsage                          // Usage, cumulative: the last wins
	EvError                          // Text: an error the upstream sent mid-stream
)

// Event is one step of an answer as it streams.
type Event struct {
	Kind         EventKind
	ID, Model    string
	Text         string
	Index        int
	Call         *ToolCall
	Stop         Stop
	StopSequence string
	Usage        Usage
}

// Decoder reads an upstream's stream, event by event, into Events.
type Decoder struct {
	wire       Wire
	formatTool string
	started    bool
	calls      int         // tool calls seen
	blocks     map[int]int // Anthropic / Converse block index → tool call index
	format     map[int]bool
	usage      Usage
}

// NewDecoder reads a stream of wire w; formatTool as for ReadReply.
func NewDecoder(w Wire, formatTool string) *Decoder {
	return &Decoder{wire: w, formatTool: formatTool, blocks: map[int]int{}, format: map[int]bool{}}
}

// Decode reads one event: its name (SSE "event:", Bedrock's :event-type)
// and its data.
func (d *Decoder) Decode(name string, data []byte) ([]Event, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) {
		return nil, nil
	}
	if d.wire == Anthropic {
		if text, ok := anthropicTextDelta(data); ok {
			return d.unwrapFormat([]Event{{Kind: EvText, Text: text}}), nil
		}
	}
	if !gjson.ValidBytes(data) {
		return nil, fmt.Errorf("convert: a %s stream event is not JSON", d.wire)
	}
	r := gjson.ParseBytes(data)
	var evs []Event
	switch d.wire {
	case OpenAI:
		evs = d.openAI(r)
	case Anthropic:
		evs = d.anthropic(r)
	case Gemini:
		evs = d.gemini(r)
	case Converse:
		evs = d.converse(name, r)
	}
	return d.unwrapFormat(evs), nil
}

// anthropicTextDelta reads Anthropic's text delta, most of a stream's
// events, as Anthropic writes it — {"type":"content_block_delta",
// "index":N,"delta":{"type":"text_delta","text":"..."}} with text that
// needs no unescaping — without validating and walking it with gjson
// once for each of its four fields. ok is false for any other event,
// spacing or order, which the general path reads.
func anthropicTextDelta(data []byte) (text string, ok bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"type":"content_block_delta","index":`))
	if !ok {
		return "", false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 1 && rest[0] == '0' { // JSON has no leading zero
		return "", false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"delta":{"type":"text_delta","text":"`)); !ok {
		return "", false
	}
	if rest, ok = bytes.CutSuffix(rest, []byte(`"}}`)); !ok {
		return "", false
	}
	for _, c := range rest {
		if c == '"' || c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(rest) {
		return "", false
	}
	return string(rest), true
}

// unwrapFormat turns the forced format tool's arguments into text.
func (d *Decoder) unwrapFormat(evs []Event) []Event {
	if d.formatTool == "" {
		return evs
	}
	out := evs[:0]
	for _, e := range evs {
		switch {
		case e.Kind == EvToolStart && e.Call.Name == d.formatTool:
			d.format[e.Index] = true
			continue
		case e.Kind == EvToolArgs && d.format[e.Index]:
			e = Event{Kind: EvText, Text: e.Text}
		case e.Kind == EvStop && e.Stop == StopTool:
			e.Stop = StopEnd
		}
		out = append(out, e)
	}
	return out
}

func (d *Decoder) start(id, model string) []Event {
	if d.started {
		return nil
	}
	d.started = true
	return []Event{{Kind: EvStart, ID: id, Model: model}}
}

func (d *Decoder) openAI(r gjson.Result) []Event {
	evs := d.start(r.Get("id").String(), r.Get("model").String())
	ch := r.Get("choices.0")
	delta := ch.Get("delta")
	for _, key := range []string{"content", "refusal"} {
		if t := delta.Get(key); t.Type == gjson.String && t.String() != "" {
			evs = append(evs, Event{Kind: EvText, Text: t.String()})
		}
	}
	for _, tc := range delta.Get("tool_calls").Array() {
		i := int(tc.Get("index").Int())
		if id, name := tc.Get("id").String(), tc.Get("function.name").String(); id != "" || name != "" {
			evs = append(evs, Event{Kind: EvToolStart, Index: i, Call: &ToolCall{ID: id, Name: name}})
		}
		if a := tc.Get("function.arguments").String(); a != "" {
			evs = append(evs, Event{Kind: EvToolArgs, Index: i, Text: a})
		}
	}
	if f := ch.Get("finish_reason").String(); f != "" {
		evs = append(evs, Event{Kind: EvStop, Stop: map[string]Stop{"stop": StopEnd, "length": StopLength, "tool_calls": StopTool,
			"function_call": StopTool, "content_filter": StopFilter}[f]})
	}
	u := r.Get("usage")
	if !u.IsObject() {
		u = r.Get("x_groq.usage")
	}
	if u.IsObject() {
		if u := usageOf(OpenAI, u); u.Reported() {
			evs = append(evs, Event{Kind: EvUsage, Usage: u})
		}
	}
	return evs
}

func (d *Decoder) anthropic(r gjson.Result) []Event {
	switch r.Get("type").String() {
	case "message_start":
		m := r.Get("message")
		evs := d.start(m.Get("id").String(), m.Get("model").String())
		if u := usageOf(Anthropic, m.Get("usage")); u.Reported() {
			d.usage = u
			evs = append(evs, Event{Kind: EvUsage, Usage: u})
		}
		return evs
	case "content_block_start":
		b := r.Get("content_block")
		if b.Get("type").String() == "tool_use" {
			i := d.calls
			d.calls++
			d.blocks[int(r.Get("index").Int())] = i
			return []Event{{Kind: EvToolStart, Index: i, Call: &ToolCall{ID: b.Get("id").String(), Name: b.Get("name").String()}}}
		}
	case "content_block_delta":
		delta := r.Get("delta")
		switch delta.Get("type").String() {
		case "text_delta":
			return []Event{{Kind: EvText, Text: delta.Get("text").String()}}
		case "input_json_delta":
			return []Event{{Kind: EvToolArgs, Index: d.blocks[int(r.Get("index").Int())], Text: delta.Get("partial_json").String()}}
		case "thinking_delta":
			return []Event{{Kind: EvThinking, Text: delta.Get("thinking").String()}}
		}
	case "message_delta":
		var evs []Event
		if s := r.Get("delta.stop_reason").String(); s != "" {
			evs = append(evs, Event{Kind: EvStop, Stop: anthropicStop(s), StopSequence: r.Get("delta.stop_sequence").String()})
		}
		if u := usageOf(Anthropic, r.Get("usage")); u.Reported() {
			// Cumulative output; input figures only where they are given.
			d.usage.Update(u)
			evs = append(evs, Event{Kind: EvUsage, Usage: d.usage})
		}
		return evs
	case "error":
		return []Event{{Kind: EvError, Text: r.Get("error.message").String()}}
	}
	return nil
}

func (d *Decoder) gemini(r gjson.Result) []Event {
	evs := d.start(r.Get("responseId").String(), r.Get("modelVersion").String())
	cand := r.Get("candidates.0")
	for _, p := range cand.Get("content.parts").Array() {
		switch {
		case p.Get("functionCall").Exists():
			call := geminiCall(p.Get("functionCall"), d.calls)
			args := call.Arguments
			call.Arguments = nil
			evs = append(evs, Event{Kind: EvToolStart, Index: d.calls, Call: call}, Event{Kind: EvToolArgs, Index: d.calls, Text: string(args)})
			d.calls++
		case p.Get("thought").Bool():
			evs = append(evs, Event{Kind: EvThinking, Text: p.Get("text").String()})
		case p.Get("text").String() != "":
			evs = append(evs, Event{Kind: EvText, Text: p.Get("text").String()})
		}
	}
	if f := cand.Get("finishReason").String(); f != "" {
		evs = append(evs, Event{Kind: EvStop, Stop: geminiStop(f, d.calls > 0)})
	}
	if u := usageOf(Gemini, r.Get("usageMetadata")); u.Reported() {
		evs = append(evs, Event{Kind: EvUsage, Usage: u})
	}
	return evs
}

func (d *Decoder) converse(name string, r gjson.Result) []Event {
	switch name {
	case "messageStart":
		return d.start("", "")
	case "contentBlockStart":
		if tu := r.Get("start.toolUse"); tu.Exists() {
			i := d.calls
			d.calls++
			d.blocks[int(r.Get("contentBlockIndex").Int())] = i
			return append(d.start("", ""), Event{Kind: EvToolStart, Index: i, Call: &ToolCall{ID: tu.Get("toolUseId").String(), Name: tu.Get("name").String()}})
		}
	case "contentBlockDelta":
		delta := r.Get("delta")
		switch {
		case delta.Get("text").Exists():
			return append(d.start("", ""), Event{Kind: EvText, Text: delta.Get("text").String()})
		case delta.Get("toolUse").Exists():
			return []Event{{Kind: EvToolArgs, Index: d.blocks[int(r.Get("contentBlockIndex").Int())], Text: delta.Get("toolUse.input").String()}}
		case delta.Get("reasoningContent.text").Exists():
			return []Event{{Kind: EvThinking, Text: delta.Get("reasoningContent.text").String()}}
		}
	case "messageStop":
		return []Event{{Kind: EvStop, Stop: converseStop(r.Get("stopReason").String())}}
	case "metadata":
		if u := usageOf(Converse, r.Get("usage")); u.Reported() {
			return []Event{{Kind: EvUsage, Usage: u}}
		}
	default:
		if m := r.Get("message").String(); m != "" {
			return []Event{{Kind: EvError, Text: name + ": " + m}} // an exception frame
		}
	}
	return nil
}

// Encoder writes Events as the client's stream.
type Encoder struct {
	wire         Wire
	model        string
	includeUsage bool
	id           string
	created      int64
	started      bool // OpenAI: the role chunk; Anthropic: message_start
	usage        Usage
	stop         Stop
	stopSeq      string
	block        int // Anthropic: the open block's index, -1 for none
	blockKind    EventKind
	blocks       int
	tools        map[int]int // tool call index → Anthropic block index
	finished     bool        // OpenAI: the finish chunk is out
	buf          bytes.Buffer
	// chunkTail is what follows the text in a text chunk (textChunk),
	// for the stream's id tailID.
	chunkTail []byte
	tailID    string
}

// NewEncoder writes a stream in the client's wire w, for a request of
// model; includeUsage asks for OpenAI's final usage chunk.
func NewEncoder(w Wire, model string, includeUsage bool) *Encoder {
	return &Encoder{wire: w, model: model, includeUsage: includeUsage, created: time.Now().Unix(), block: -1, tools: map[int]int{}}
}

// Encode returns the bytes that carry ev to the client (none for some).
func (e *Encoder) Encode(ev Event) []byte {
	e.buf.Reset()
	switch ev.Kind {
	case EvStart:
		if e.id == "" {
			e.id = ev.ID
		}
		return nil
	case EvUsage:
		e.usage = ev.Usage
		return nil
	case EvStop:
		e.stop, e.stopSeq = ev.Stop, ev.StopSequence
	}
	if e.wire == OpenAI {
		e.openAI(ev)
	} else {
		e.anthropic(ev)
	}
	return bytes.Clone(e.buf.Bytes())
}

// End returns the stream's last bytes: what a clean end carries (the
// usage, the stop, [DONE] or message_stop).
func (e *Encoder) End() []byte {
	e.buf.Reset()
	if e.wire == OpenAI {
		e.openAIRole()
		if !e.finished {
			finish := OpenAIFinish(e.stop)
			if finish == "" {
				finish = "stop"
			}
			e.chunk(map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish})
		}
		if e.includeUsage {
			e.sse("", map[string]any{"id": openAIID(e.id), "object": "chat.completion.chunk", "created": e.created, "model": e.model,
				"choices": []any{}, "usage": openAIUsageBody(e.usage)})
		}
		e.buf.WriteString("data: [DONE]\n\n")
		return bytes.Clone(e.buf.Bytes())
	}
	e.messageStart()
	e.closeBlock()
	stop := AnthropicStop(e.stop)
	if stop == "" {
		stop = "end_turn"
	}
	var seq any
	if e.stopSeq != "" {
		seq = e.stopSeq
	}
	e.sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": seq},
		"usage": anthropicUsageBody(e.usage)})
	e.sse("message_stop", map[string]any{"type": "message_stop"})
	return bytes.Clone(e.buf.Bytes())
}

func (e *Encoder) sse(name string, v any) {
	b, _ := marshal(v)
	if name != "" {
		e.buf.WriteString("event: " + name + "\n")
	}
	e.buf.WriteString("data: ")
	e.buf.Write(b)
	e.buf.WriteString("\n\n")
}

func (e *Encoder) chunk(choice map[string]any) {
	e.sse("", map[string]any{"id": openAIID(e.id), "object": "chat.completion.chunk", "created": e.created, "model": e.model,
		"choices": []any{choice}})
}

// textChunk writes the chunk of a text delta, most of a stream's, as
// chunk writes it — the same bytes, keys in encoding/json's order —
// without building and sorting its three maps: all that follows the text
// is the same for the whole stream, and written once.
func (e *Encoder) textChunk(text string) {
	if e.chunkTail == nil || e.tailID != e.id {
		t := []byte(`},"finish_reason":null,"index":0}],"created":`)
		t = strconv.AppendInt(t, e.created, 10)
		t = appendString(append(t, `,"id":`...), openAIID(e.id))
		t = appendString(append(t, `,"model":`...), e.model)
		e.chunkTail, e.tailID = append(t, `,"object":"chat.completion.chunk"}`...), e.id
	}
	b := append(e.buf.AvailableBuffer(), `data: {"choices":[{"delta":{"content":`...)
	b = append(append(appendString(b, text), e.chunkTail...), "\n\n"...)
	e.buf.Write(b)
}

func (e *Encoder) openAIRole() {
	if !e.started {
		e.started = true
		e.chunk(map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil})
	}
}

func (e *Encoder) openAI(ev Event) {
	e.openAIRole()
	switch ev.Kind {
	case EvText:
		e.textChunk(ev.Text)
	case EvToolStart:
		e.chunk(map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{map[string]any{"index": ev.Index, "id": ev.Call.ID,
			"type": "function", "function": map[string]any{"name": ev.Call.Name, "arguments": ""}}}}, "finish_reason": nil})
	case EvToolArgs:
		e.chunk(map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{map[string]any{"index": ev.Index,
			"function": map[string]any{"arguments": ev.Text}}}}, "finish_reason": nil})
	case EvStop:
		if !e.finished {
			e.finished = true
			finish := OpenAIFinish(ev.Stop)
			if finish == "" {
				finish = "stop"
			}
			e.chunk(map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish})
		}
	case EvError:
		e.sse("", map[string]any{"error": map[string]any{"message": ev.Text, "type": "server_error", "code": "upstream_error"}})
	}
}

func (e *Encoder) messageStart() {
	if e.started {
		return
	}
	e.started = true
	u := anthropicUsageBody(e.usage)
	u["output_tokens"] = 0
	e.sse("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": anthropicID(e.id), "type": "message",
		"role": "assistant", "model": e.model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": u}})
}

func (e *Encoder) closeBlock() {
	if e.block >= 0 {
		e.sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": e.block})
		e.block = -1
	}
}

func (e *Encoder) openBlock(kind EventKind, block map[string]any) int {
	e.closeBlock()
	e.block, e.blockKind = e.blocks, kind
	e.blocks++
	e.sse("content_block_start", map[string]any{"type": "content_block_start", "index": e.block, "content_block": block})
	return e.block
}

func (e *Encoder) anthropic(ev Event) {
	e.messageStart()
	switch ev.Kind {
	case EvText:
		if e.block < 0 || e.blockKind != EvText {
			e.openBlock(EvText, map[string]any{"type": "text", "text": ""})
		}
		e.sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": e.block, "delta": map[string]any{"type": "text_delta", "text": ev.Text}})
	case EvToolStart:
		e.tools[ev.Index] = e.openBlock(EvToolStart, map[string]any{"type": "tool_use", "id": toolUseID(ev.Call.ID), "name": ev.Call.Name, "input": map[string]any{}})
	case EvToolArgs:
		b, ok := e.tools[ev.Index]
		if !ok || b != e.block {
			return // arguments of a call whose block is closed: Anthropic's wire cannot reopen it
		}
		e.sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": b, "delta": map[string]any{"type": "input_json_delta", "partial_json": ev.Text}})
	case EvError:
		e.sse("error", map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": ev.Text}})
	}
}
