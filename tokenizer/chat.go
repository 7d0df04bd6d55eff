package tokenizer

// Chat message overheads of the OpenAI chat format (gpt-3.5-turbo-0613 and
// later, gpt-4*, gpt-4o*, o-series): every message is wrapped in
// <|start|>{role/name}\n{content}<|end|>, and every reply is primed with
// <|start|>assistant<|message|>. These are the OpenAI cookbook's figures.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
	tokensReplyPrime = 3
	// Tools are rendered by the API in a compact TypeScript-like form; we
	// count their JSON instead, which is always longer, plus the wrapper
	// per function and once for the namespace.
	tokensPerTool      = 12
	tokensToolsWrapper = 10
)

// ChatMessage is the part of one chat message that costs tokens.
type ChatMessage struct {
	Role string
	Name string
	// Texts are the text content parts (a string content is one part).
	Texts []string
	// ImageTokens bounds the message's images (and any other input the
	// caller priced in tokens itself); it is added as it is.
	ImageTokens int64
	// AudioTokens bounds the message's audio: added as it is, and kept
	// apart so that the caller can price it at the audio rate.
	AudioTokens int64
	// Extra holds every other string the model reads: tool_call_id, a
	// refusal, and the JSON of each tool or function call.
	Extra []string
}

// Chat returns the prompt tokens of a chat request: messages with their
// overheads, tool definitions (each the JSON text of one tool) and the
// messages' image bounds. For plain text it equals the API's count (the
// cookbook's method); with tools it is an upper bound.
func (c *Counter) Chat(msgs []ChatMessage, tools []string) int64 {
	var n int64
	for i := range msgs {
		m := &msgs[i]
		n += tokensPerMessage + c.Count(m.Role)
		if m.Name != "" {
			n += tokensPerName + c.Count(m.Name)
		}
		for _, t := range m.Texts {
			n += c.Count(t)
		}
		for _, t := range m.Extra {
			n += c.Count(t)
		}
		n += m.ImageTokens + m.AudioTokens
	}
	if len(tools) > 0 {
		n += tokensToolsWrapper
		for _, t := range tools {
			n += tokensPerTool + c.Count(t)
		}
	}
	return n + tokensReplyPrime
}
