package catalog

// Preset is an OpenAI-compatible provider's address and quirks: what an
// upstream of kind openai with that preset talks to.
type Preset struct {
	// BaseURL is the API root; empty for self-hosted servers, which name
	// their own.
	BaseURL string
	// Provider is the catalogue provider its prices are looked up at;
	// empty where the models are the operator's to price (self-hosted).
	Provider string
	// CapField is the output cap the server honours. Every OpenAI-
	// compatible server honours max_tokens; OpenAI's reasoning models take
	// only max_completion_tokens, which some servers reject or ignore — an
	// ignored cap would leave the output unbounded, so the gateway writes
	// the one the server reads.
	CapField string
	// StreamUsage is how a stream reports its usage: "stream_options" (the
	// client asks with stream_options.include_usage), "always" (the last
	// chunk carries it unasked; the field would be refused) or "x_groq"
	// (Groq's x_groq.usage on the last chunk).
	StreamUsage string
}

// Presets are the OpenAI-compatible providers a config may name by preset.
var Presets = map[string]Preset{
	"openai":     {BaseURL: "https://api.openai.com/v1", Provider: "openai", CapField: "max_completion_tokens", StreamUsage: "stream_options"},
	"mistral":    {BaseURL: "https://api.mistral.ai/v1", Provider: "mistral", CapField: "max_tokens", StreamUsage: "always"},
	"groq":       {BaseURL: "https://api.groq.com/openai/v1", Provider: "groq", CapField: "max_tokens", StreamUsage: "x_groq"},
	"deepseek":   {BaseURL: "https://api.deepseek.com/v1", Provider: "deepseek", CapField: "max_tokens", StreamUsage: "stream_options"},
	"together":   {BaseURL: "https://api.together.xyz/v1", Provider: "together", CapField: "max_tokens", StreamUsage: "stream_options"},
	"fireworks":  {BaseURL: "https://api.fireworks.ai/inference/v1", Provider: "fireworks", CapField: "max_tokens", StreamUsage: "stream_options"},
	"openrouter": {BaseURL: "https://openrouter.ai/api/v1", Provider: "openrouter", CapField: "max_tokens", StreamUsage: "stream_options"},
	"xai":        {BaseURL: "https://api.x.ai/v1", Provider: "xai", CapField: "max_tokens", StreamUsage: "stream_options"},
	"vllm":       {CapField: "max_tokens", StreamUsage: "stream_options"},
	"ollama":     {BaseURL: "http://127.0.0.1:11434/v1", CapField: "max_tokens", StreamUsage: "stream_options"},
}
