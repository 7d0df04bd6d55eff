// Package convert translates between the providers' chat wires through one
// canonical conversation: a client's request in OpenAI's Chat Completions or
// Anthropic's Messages format becomes a Chat, which is written out as the
// upstream's wire (OpenAI chat, Anthropic Messages, Gemini generateContent,
// Bedrock Converse); the upstream's answer — a JSON body, or a stream event
// by event — comes back as a Reply or as Events, written out in the
// client's format. Usage, finish reasons, tool calls and refusals survive
// the trip.
//
// It is pure: bytes in, bytes out. It never prices, counts or forwards.
package convert

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Wire is a chat dialect.
type Wire uint8

const (
	OpenAI    Wire = iota + 1 // Chat Completions
	Anthropic                 // Messages
	Gemini                    // generateContent (Gemini API and Vertex AI)
	Converse                  // Bedrock Converse
	Responses                 // OpenAI's Responses API (its usage only, as yet)
)

func (w Wire) String() string {
	switch w {
	case OpenAI:
		return "openai"
	case Anthropic:
		return "anthropic"
	case Gemini:
		return "gemini"
	case Converse:
		return "converse"
	case Responses:
		return "responses"
	}
	return "unknown"
}

// Chat is one conversation request, whatever wire it came in.
type Chat struct {
	Model    string
	System   []Part // text parts
	Messages []Message
	Tools    []Tool
	// ToolChoice is "" (the provider's default), "auto", "none",
	// "required" (any tool) or "tool" (the one named ToolName).
	ToolChoice string
	ToolName   string
	// ParallelTools false asks for one tool call at most (nil: default).
	ParallelTools *bool
	// MaxTokens is the output cap, always set by the time a Chat is
	// written (the gateway's bound).
	MaxTokens   int64
	Temperature *float64
	TopP        *float64
	Stop        []string
	Format      *Format
	Stream      bool
	User        string
}

// Format asks for JSON output: Schema set for a JSON schema, else any JSON
// object.
type Format struct {
	Name   string
	Schema json.RawMessage
	Strict bool
}

// Message is one turn: role "user", "assistant", or "tool" (results of
// tool calls, which Anthropic and Bedrock carry in a user turn).
type Message struct {
	Role  string
	Parts []Part
}

// Part is one piece of a message.
type Part struct {
	Kind PartKind
	Text string // text, refusal, thinking
	// Media is an image or a document: inline bytes (base64) or a URL.
	Media *Media
	// Call is a tool call (assistant), Result a tool's result.
	Call   *ToolCall
	Result *ToolResult
	// Signature is an Anthropic thinking block's signature.
	Signature string
}

// PartKind says what a Part holds.
type PartKind uint8

const (
	Text PartKind = iota + 1
	Image
	Document
	Call
	Result
	Thinking
	Refusal
)

// Media is an image or a document.
type Media struct {
	MediaType string // image/png, application/pdf…
	Data      string // base64, when inline
	URL       string // when by reference
	Name      string // a document's name, when it has one
	// Detail is OpenAI's image detail ("low", "high", "auto").
	Detail string
}

// ToolCall is a model's call of a tool; Arguments is a JSON object.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// ToolResult answers a tool call.
type ToolResult struct {
	ID      string // the call's id
	Name    string // the tool's name (Gemini keys results by it)
	Parts   []Part // text (and images, where the wire takes them)
	IsError bool
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON schema object
}

// Stop is why an answer ended.
type Stop string

const (
	StopEnd      Stop = "end"           // the model finished
	StopLength   Stop = "length"        // the output cap
	StopTool     Stop = "tool"          // it called tools
	StopSequence Stop = "stop_sequence" // a stop sequence
	StopFilter   Stop = "filter"        // a safety filter or a refusal
)

// Reply is a whole answer.
type Reply struct {
	ID    string
	Model string
	Parts []Part // text, tool calls, thinking, refusal
	Stop  Stop
	// StopSequence is the sequence that stopped it, when one did.
	StopSequence string
	Usage        Usage
}

// Error is a refusal in the request's terms, for a 400 answer.
type Error struct {
	Param   string
	Message string
}

func (e *Error) Error() string {
	if e.Param == "" {
		return "convert: " + e.Message
	}
	return fmt.Sprintf("convert: %s: %s", e.Param, e.Message)
}

func errorf(param, format string, args ...any) error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}

// Texts returns the text of parts of kind Text, joined.
func Texts(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Kind == Text {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// object is arguments as a JSON object, as every wire but OpenAI's
// carries them: "{}" for none, and arguments that are not an object (a
// model cut off mid-call writes broken JSON) kept as text under
// "_unparsed_arguments" rather than lost or sent broken.
func object(raw json.RawMessage) json.RawMessage {
	t := strings.TrimSpace(string(raw))
	switch {
	case t == "" || t == "null":
		return json.RawMessage("{}")
	case strings.HasPrefix(t, "{") && json.Valid([]byte(t)):
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]string{"_unparsed_arguments": t})
	return b
}

// argsText is arguments as OpenAI carries them: a string, "{}" for none.
func argsText(raw json.RawMessage) string {
	if t := strings.TrimSpace(string(raw)); t != "" && t != "null" {
		return t
	}
	return "{}"
}

// turns are a request's messages in a wire whose roles must alternate
// (Anthropic, Gemini, Bedrock): a message of the role of the one before
// it is merged into it. key names a message's list of blocks or parts.
type turns struct {
	key  string
	list []map[string]any
}

func (t *turns) add(role string, items []map[string]any) {
	if n := len(t.list); n > 0 && t.list[n-1]["role"] == role {
		t.list[n-1][t.key] = append(t.list[n-1][t.key].([]map[string]any), items...)
		return
	}
	t.list = append(t.list, map[string]any{"role": role, t.key: items})
}
