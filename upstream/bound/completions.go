package bound

import (
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// completionRequest is an OpenAI legacy completions body (see chatRequest
// for the tags).
type completionRequest struct {
	unknown
	Model         string         `json:"model" bound:"bounded"`
	Prompt        prompts        `json:"prompt" bound:"bounded"`
	Suffix        *string        `json:"suffix" bound:"bounded"`
	MaxTokens     *int64         `json:"max_tokens" bound:"bounded"`
	N             *int64         `json:"n" bound:"bounded"`
	BestOf        *int64         `json:"best_of" bound:"bounded"`
	Stream        bool           `json:"stream" bound:"bounded"`
	StreamOptions *streamOptions `json:"stream_options" bound:"bounded"`
	ServiceTier   *string        `json:"service_tier" bound:"bounded"`
	User          *string        `json:"user" bound:"free"`

	Echo             jsontext.Value `json:"echo" bound:"free"`
	Temperature      jsontext.Value `json:"temperature" bound:"free"`
	TopP             jsontext.Value `json:"top_p" bound:"free"`
	PresencePenalty  jsontext.Value `json:"presence_penalty" bound:"free"`
	FrequencyPenalty jsontext.Value `json:"frequency_penalty" bound:"free"`
	LogitBias        jsontext.Value `json:"logit_bias" bound:"free"`
	Logprobs         jsontext.Value `json:"logprobs" bound:"free"`
	Seed             jsontext.Value `json:"seed" bound:"free"`
	Stop             jsontext.Value `json:"stop" bound:"free"`
}

// embeddingRequest is an OpenAI embeddings body.
type embeddingRequest struct {
	unknown
	Model          string         `json:"model" bound:"bounded"`
	Input          prompts        `json:"input" bound:"bounded"`
	User           *string        `json:"user" bound:"free"`
	Dimensions     jsontext.Value `json:"dimensions" bound:"free"`
	EncodingFormat jsontext.Value `json:"encoding_format" bound:"free"`
}

func init() {
	register[completionRequest]()
	register[embeddingRequest]()
}

// prompts is a prompt or an embeddings input: a string, strings, token
// ids (one tokenized prompt) or arrays of token ids. Each string and each
// array of ids is one prompt; ids at the top level are one together.
type prompts struct {
	set     bool
	texts   []string
	ids     int64 // token ids, counted as one token each
	prompts int64
}

func (p *prompts) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	p.set = true
	switch d.PeekKind() {
	case 'n':
		p.set = false
		_, err := d.ReadToken()
		return err
	case '"':
		var s string
		if err := readString(d, &s); err != nil {
			return err
		}
		p.texts, p.prompts = []string{s}, 1
		return nil
	case '[':
	default:
		return refuse("must be a string, an array of strings, an array of token ids or an array of such arrays")
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	loose := false // token ids at the top level: one prompt together
	var kinds [256]bool
	for i := 0; d.PeekKind() != ']'; i++ {
		if k := d.PeekKind(); !kinds[k] {
			if kinds['"'] || kinds['0'] || kinds['['] {
				// A server may read an array of mixed kinds as one prompt
				// an element, or refuse it: not one reading.
				return &fieldError{sub: "[" + strconv.Itoa(i) + "]", msg: "must be of the kind of the elements before it: strings, token ids or arrays of token ids, not a mix"}
			}
			kinds[k] = true
		}
		switch d.PeekKind() {
		case '"':
			var s string
			if err := readString(d, &s); err != nil {
				return err
			}
			p.texts = append(p.texts, s)
			p.prompts++
		case '0':
			var id int64
			if err := json.UnmarshalDecode(d, &id); err != nil {
				return err
			}
			p.ids++
			loose = true
		case '[':
			var ids []int64
			if err := json.UnmarshalDecode(d, &ids); err != nil {
				return err
			}
			p.ids += int64(len(ids))
			p.prompts++
		default:
			if _, err := d.ReadValue(); err != nil {
				return err
			}
			return &fieldError{sub: "[" + strconv.Itoa(i) + "]", msg: "must be a string, a token id or an array of token ids"}
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	if loose {
		p.prompts++
	}
	if p.prompts == 0 {
		return refuse("must not be empty")
	}
	return nil
}

// count is the prompts' tokens: each string counted, each id one.
func (p *prompts) count(m *Model) int64 {
	n := p.ids
	for _, s := range p.texts {
		n += m.Counter.Count(s)
	}
	return n
}

func (c *completionRequest) head() (string, bool, string) { return c.Model, c.Stream, deref(c.User) }

func (c *completionRequest) input(m *Model) (int64, int64, error) {
	if !c.Prompt.set {
		return 0, 0, badRequest("prompt", "is required")
	}
	n := c.Prompt.count(m)
	if c.Suffix != nil {
		n += m.Counter.Count(*c.Suffix)
	}
	return n, 0, nil
}

// output: the legacy API's own default cap is 16, and every prompt gets n
// (best_of) choices of its own.
func (c *completionRequest) output(m *Model, p *Prepared) error {
	if err := p.capOutput(m, "max_tokens", c.MaxTokens, min(16, m.MaxOutputTokens), false); err != nil {
		return err
	}
	choices, err := choicesOf(c.N, c.BestOf, c.Prompt.prompts)
	if err != nil {
		return err
	}
	p.Choices = choices
	if c.Stream {
		p.askUsage(m, c.StreamOptions)
	}
	return nil
}

func (c *completionRequest) refused(*Model) error { return serviceTier(c.ServiceTier) }

func (e *embeddingRequest) head() (string, bool, string) { return e.Model, false, deref(e.User) }

func (e *embeddingRequest) input(m *Model) (int64, int64, error) {
	if !e.Input.set {
		return 0, 0, badRequest("input", "is required")
	}
	return e.Input.count(m), 0, nil
}

func (e *embeddingRequest) output(*Model, *Prepared) error { return nil }
func (e *embeddingRequest) refused(*Model) error           { return nil }
