package upstream

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// Translation is how one request reaches an upstream that speaks another
// wire than its client, and how its answer comes back.
type Translation struct {
	// Client and Upstream are the two wires.
	Client, Upstream convert.Wire
	// FormatTool is the tool a JSON-output request was forced to call on
	// a wire without structured output (convert.FormatTool), or "".
	FormatTool string
	// ClientModel is the model the client asked for (an alias, maybe): the
	// answer names it.
	ClientModel string
	// IncludeUsage: an OpenAI client asked for the usage chunk.
	IncludeUsage bool
	chat         *convert.Chat
	provider     Provider
	model        *Model
}

// Wire is the chat wire a provider speaks for a model (Vertex AI speaks
// Gemini's for Gemini, Anthropic's for Claude), and how it writes a
// request in it.
type Wire interface {
	Wire(model string) convert.Wire
	Encode(c *convert.Chat, m *Model) ([]byte, error)
}

// clientWire is the wire of a client endpoint that translation serves.
func clientWire(e Endpoint) (convert.Wire, bool) {
	switch e {
	case Chat:
		return convert.OpenAI, true
	case Messages:
		return convert.Anthropic, true
	}
	return 0, false
}

// Translate prepares r for p, which speaks another wire: the request is
// read into a canonical conversation and written out in p's wire, and the
// bound is that written request's — its input counted with m's tokenizer
// (scaled by its token ratio, plus what p's wire adds for tools), its
// output the cap written into it.
func (r *Request) Translate(m *Model, p Provider) (*Prepared, error) {
	w, ok := p.(Wire)
	cw, served := clientWire(r.Endpoint)
	if !ok || !served {
		return nil, badRequest("model", "%s is served by an upstream that cannot take %s requests", m.Name, r.Endpoint)
	}
	if err := r.refuseUnbounded(m); err != nil {
		return nil, err
	}
	var c *convert.Chat
	var err error
	// r.raw is valid JSON (ParseRequest): the converters do not check again.
	if cw == convert.OpenAI {
		c, err = convert.FromOpenAI(r.raw)
	} else {
		c, err = convert.FromAnthropic(r.raw)
	}
	if err != nil {
		var ce *convert.Error
		if asConvert(err, &ce) {
			return nil, badRequest(ce.Param, "%s", ce.Message)
		}
		return nil, err
	}
	if m.Embedding {
		return nil, badRequest("model", "%s is an embedding model", m.Name)
	}
	clientModel := c.Model
	c.Model = m.Name
	p2 := &Prepared{Choices: 1, ClientWantsUsage: true}
	switch {
	case c.MaxTokens == 0 && cw == convert.Anthropic:
		return nil, badRequest("max_tokens", "is required")
	case c.MaxTokens == 0:
		c.MaxTokens = m.DefaultOutputTokens
	case c.MaxTokens < 1 || c.MaxTokens > m.MaxOutputTokens:
		return nil, badRequest(r.capName(cw), "must be between 1 and %d", m.MaxOutputTokens)
	}
	r.capKey = r.capName(cw)
	if p2.InputTokens, err = m.chatTokens(c, w.Wire(m.Name)); err != nil {
		return nil, err
	}
	t := &Translation{Client: cw, Upstream: w.Wire(m.Name), ClientModel: clientModel, chat: c, provider: p, model: m}
	if c.Format != nil && (w.Wire(m.Name) == convert.Anthropic || w.Wire(m.Name) == convert.Converse) {
		t.FormatTool = convert.FormatTool
	}
	if cw == convert.OpenAI && c.Stream {
		t.IncludeUsage = r.wantsUsage()
	}
	p2.Translation = t
	if err := p2.encode(c.MaxTokens); err != nil {
		return nil, err
	}
	return p2, nil
}

// encode writes the translation's request with an output cap of limit.
func (p *Prepared) encode(limit int64) error {
	t := p.Translation
	t.chat.MaxTokens = limit
	body, err := t.provider.(Wire).Encode(t.chat, t.model)
	if err != nil {
		if ce, ok := err.(*convert.Error); ok {
			return badRequest(ce.Param, "%s", ce.Message)
		}
		return fmt.Errorf("upstream: writing the %s request: %w", t.Upstream, err)
	}
	p.Body, p.OutputCap, p.MaxOutputTokens = body, limit, limit
	return nil
}

func asConvert(err error, target **convert.Error) bool {
	ce, ok := err.(*convert.Error)
	if ok {
		*target = ce
	}
	return ok
}

// capName is the client's output cap field.
func (r *Request) capName(cw convert.Wire) string {
	if cw == convert.Anthropic {
		return "max_tokens"
	}
	if _, ok := r.fields.get("max_tokens"); ok {
		return "max_tokens"
	}
	return "max_completion_tokens"
}

// wantsUsage reports whether an OpenAI client asked for its stream's usage.
func (r *Request) wantsUsage() bool {
	return strings.Contains(string(r.fields.raw("stream_options")), `"include_usage":true`) ||
		strings.Contains(string(r.fields.raw("stream_options")), `"include_usage": true`)
}

// toolPromptTokens bounds what a provider adds to the prompt when tools
// are offered (Anthropic's tool system prompt is up to 346 tokens on Claude
// 4; Gemini's and Bedrock's are not published): the same margin for all.
const toolPromptTokens = 400

// chatTokens bounds the input tokens of c as wire takes it: every text,
// tool call and result and tool definition counted as a chat with m's
// tokenizer, images at m's figure, scaled by m's token ratio.
func (m *Model) chatTokens(c *convert.Chat, wire convert.Wire) (int64, error) {
	counted := make([]tokenizer.ChatMessage, 0, len(c.Messages)+1)
	if len(c.System) > 0 {
		counted = append(counted, tokenizer.ChatMessage{Role: "system", Texts: []string{convert.Texts(c.System)}})
	}
	for i, msg := range c.Messages {
		cm := tokenizer.ChatMessage{Role: msg.Role}
		for j, part := range msg.Parts {
			param := fmt.Sprintf("messages[%d].content[%d]", i, j)
			switch part.Kind {
			case convert.Text, convert.Refusal, convert.Thinking:
				cm.Texts = append(cm.Texts, part.Text)
			case convert.Call:
				cm.Extra = append(cm.Extra, part.Call.Name, string(part.Call.Arguments))
			case convert.Result:
				cm.Extra = append(cm.Extra, part.Result.ID, part.Result.Name, convert.Texts(part.Result.Parts))
			case convert.Image:
				n, err := m.image(part.Media.Detail, param)
				if err != nil {
					return 0, err
				}
				cm.ImageTokens += n
			case convert.Document:
				switch md := part.Media; {
				case md.MediaType == "application/pdf" && md.Data != "":
					n, err := m.pdf(md.Data, param)
					if err != nil {
						return 0, err
					}
					cm.ImageTokens += n
				case md.MediaType == "text/plain":
					cm.Texts = append(cm.Texts, md.Data)
				default:
					return 0, badRequest(param, "%s is a document the gateway cannot price (%s): send a PDF inline", param, md.MediaType)
				}
			}
		}
		counted = append(counted, cm)
	}
	var tools []string
	for _, t := range c.Tools {
		tools = append(tools, t.Name+" "+t.Description+" "+string(compact(t.Parameters)))
	}
	if f := c.Format; f != nil {
		tools = append(tools, convert.FormatTool+" "+string(compact(f.Schema)))
	}
	n := scale(m.Counter.Chat(counted, tools), m.TokenRatio)
	if len(tools) > 0 && wire != convert.OpenAI {
		n += toolPromptTokens
	}
	return n, nil
}

// Usage is the canonical usage as the budget prices it.
func Usage(u convert.Usage) (budget.Usage, bool) {
	if !u.Reported {
		return budget.Usage{}, false
	}
	b := budget.Usage{InputTokens: u.Input, CachedInputTokens: u.CachedInput, CacheWriteTokens: u.CacheWrite, OutputTokens: u.Output,
		ReasoningTokens: u.Reasoning, InputAudioTokens: u.InputAudio, OutputAudioTokens: u.OutputAudio}
	if b.Validate() != nil {
		return budget.Usage{}, false
	}
	return b, true
}

// EndpointOf is the endpoint a request in wire w goes to, where the
// provider's URL depends on it.
func EndpointOf(w convert.Wire) Endpoint {
	if w == convert.Anthropic {
		return Messages
	}
	return Chat
}

// Signer is a provider that authorises each request by its content (AWS
// SigV4) or with a credential it refreshes (OAuth): after Header, before
// the request is sent.
type Signer interface {
	Sign(ctx context.Context, req *http.Request, body []byte) error
}
