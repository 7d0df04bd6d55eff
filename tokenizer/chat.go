package tokenizer

import "strings"

// Chat message overheads of the OpenAI chat format (gpt-3.5-turbo-0613 and
// later, gpt-4*, gpt-4o*, o-series): every message is wrapped in
// <|start|>{role/name}\n{content}<|end|>, and every reply is primed with
// <|start|>assistant<|message|>. These are the OpenAI cookbook's figures.
const (
	// TokensPerMessage wraps every message.
	TokensPerMessage = 3
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

// texts bounds a message's text parts as the provider may read them: one
// after the other, each counted (with a separator between two), or joined
// into one text — which BPE can count higher than its parts (" xwm" and
// "pq" are one token each, " xwmpq" four).
func (c *Counter) texts(texts []string) int64 {
	var n int64
	for _, t := range texts {
		n += c.Count(t)
	}
	if len(texts) < 2 {
		return n
	}
	return max(n+int64(len(texts)-1), c.Count(strings.Join(texts, "")))
}

// Chat returns the prompt tokens of a chat request: messages with their
// overheads, tool definitions (each the JSON text of one tool) and the
// messages' image bounds. For plain text it equals the API's count (the
// cookbook's method); with tools it is an upper bound.
func (c *Counter) Chat(msgs []ChatMessage, tools []string) int64 {
	var n int64
	for i := range msgs {
		m := &msgs[i]
		n += TokensPerMessage + c.Count(m.Role)
		if m.Name != "" {
			n += tokensPerName + c.Count(m.Name)
		}
		n += c.texts(m.Texts)
		for _, t := range m.Extra {
			n += c.Count(t)
		}
		n += m.ImageTokens + m.AudioTokens
	}
	if len(tools) > 0 {
		n += tokensToolsWrapper
		for _, t := range tools {
			// Per element of an array (an enum's values) the API's
			// rendering may take more tokens than the JSON's `"v",`: the
			// cookbook counts 3 and the value's own for each. Two more a
			// comma bounds it.
			n += tokensPerTool + c.Count(t) + 2*int64(strings.Count(t, ","))
		}
	}
	return n + tokensReplyPrime
}
