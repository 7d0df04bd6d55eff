package bound

// Endpoint is one client route's API.
type Endpoint uint8

const (
	Chat        Endpoint = iota + 1 // OpenAI's Chat Completions
	Completions                     // OpenAI's legacy completions
	Embeddings                      // OpenAI's embeddings
	Messages                        // Anthropic's Messages
	Responses                       // OpenAI's Responses
)

// Path is the endpoint's path below the API root.
func (e Endpoint) Path() string {
	switch e {
	case Chat:
		return "/chat/completions"
	case Completions:
		return "/completions"
	case Embeddings:
		return "/embeddings"
	case Messages:
		return "/messages"
	case Responses:
		return "/responses"
	}
	return ""
}

func (e Endpoint) String() string {
	switch e {
	case Chat:
		return "chat"
	case Completions:
		return "completions"
	case Embeddings:
		return "embeddings"
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	}
	return "unknown"
}
