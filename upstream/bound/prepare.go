package bound

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Request is a client's body as the gateway read it: parsed once, then
// prepared for each deployment that may serve it (Prepare). It is not
// changed after Parse, so preparations may share it.
type Request struct {
	Endpoint Endpoint
	// Model is the model (or alias) the body names; Stream whether it
	// asks for a stream; User the end user it names, if any.
	Model  string
	Stream bool
	User   string
	// body is the body as the client sent it.
	body []byte
	// betas are the anthropic-beta values the client sent.
	betas []string
	// read is the body decoded as its endpoint's type.
	read reading
}

// reading is one endpoint's decoded body: what it names, what it counts
// as input and output, and what in it is refused whatever the deployment.
type reading interface {
	// head is the body's model, whether it streams and its end user.
	head() (model string, stream bool, user string)
	// unknowns are its top-level fields the gateway does not know.
	unknowns() map[string]jsontext.Value
	// input counts the input tokens for m, audio the part that is audio.
	input(m *Model) (tokens, audio int64, err error)
	// output sets p's output bound (cap, choices, prediction) and the
	// edits it needs (a default cap, usage asked of a stream).
	output(m *Model, p *Prepared) error
	// refused refuses what bills beyond m's price table.
	refused(m *Model) error
}

// Parse reads body as a request of endpoint ep, with the client's
// headers h: the one reading of it (see read.go). A refusal is a
// *RequestError naming the field.
func Parse(ep Endpoint, body []byte, h http.Header) (*Request, error) {
	r := &Request{Endpoint: ep, body: body}
	switch ep {
	case Chat:
		r.read = new(chatRequest)
	case Completions:
		r.read = new(completionRequest)
	case Embeddings:
		r.read = new(embeddingRequest)
	case Messages:
		r.read = new(messagesRequest)
	case Responses:
		r.read = new(responsesRequest)
	default:
		return nil, &RequestError{Message: "unknown endpoint"}
	}
	if err := read(body, r.read); err != nil {
		return nil, err
	}
	r.Model, r.Stream, r.User = r.read.head()
	if r.Model == "" {
		return nil, badRequest("model", "is required")
	}
	if ep == Messages {
		if v := h.Get("Anthropic-Version"); v != "" && !slices.Contains(anthropicVersions, v) {
			return nil, badRequest("anthropic-version", "the API version %q is not one the gateway knows (%s): a version changes what a request means", v, strings.Join(anthropicVersions, ", "))
		}
		r.betas = betasOf(h)
	}
	return r, nil
}

// Prepared is a request ready to forward to one deployment, with the
// upper bound of what that deployment may bill for it.
type Prepared struct {
	// Body is the request to forward: the client's, with an explicit
	// output cap and, for a stream, its usage asked for.
	Body []byte
	// InputTokens bounds the prompt, InputAudioTokens the part of it
	// that is audio.
	InputTokens      int64
	InputAudioTokens int64
	// MaxOutputTokens bounds the output of all choices together:
	// OutputCap × Choices + Predicted.
	MaxOutputTokens int64
	// OutputCap is the output cap per choice written in Body, in the field
	// CapField (empty for embeddings).
	OutputCap int64
	CapField  string
	// Choices is how many outputs are generated (n, best_of, × prompts).
	Choices int64
	// Predicted is the output a predicted output may add beyond the cap.
	Predicted int64
	// AudioOutput says the request asks for audio output.
	AudioOutput bool
	// CacheWrites says the request marks content for the provider's
	// cache (Anthropic's cache_control), whose writes bill dearer than
	// input: only then can a usage that reports none have had some.
	CacheWrites bool
	// CacheWrites1h says some of them are for an hour (ttl "1h"), whose
	// writes bill dearer still: only then are they reserved at that rate.
	CacheWrites1h bool
	// WebSearches is the most web searches the provider may run for the
	// request, each billed a fee; InputTokens bounds their results too.
	WebSearches int64
	// PerMille is the multiple of the list price the request bills at,
	// in thousandths (a mode or region: Price); 0 is the list price.
	PerMille int64
	// fast and geo are the multiples (thousandths) of fast mode and
	// US-only inference the request asked for, 0 where it did not;
	// PerMille is their product.
	fast, geo int64
	// ClientWantsUsage is true when the client itself asked for the final
	// usage chunk of a stream; otherwise the gateway strips it.
	ClientWantsUsage bool
	// Betas is the anthropic-beta header to forward, if any.
	Betas string
	// LongContext says the request may pass the provider's long-context
	// threshold (Anthropic's context-1m beta): Cost prices it at the
	// model's long-context tier, or refuses it on a model without one.
	LongContext bool
	// Translation, when set, says the upstream speaks another wire than
	// the client: Body is in the upstream's, and the answer comes back
	// through it.
	Translation *Translation

	req   *Request
	edits []edit
}

// edit is a top-level field of the forwarded body set to value, or left
// out where value is nil.
type edit struct {
	name  string
	value []byte
}

// Upstream is what preparing a request needs of the upstream that serves
// it: the endpoints it takes as they are. For others it must be a Writer,
// and the request is translated into its wire.
type Upstream interface {
	Serves(Endpoint) bool
}

// maxChoices bounds the choices one request may generate: each prompt × n
// (or best_of).
const maxChoices = 128 * 128

// Prepare bounds r for model m at upstream up: the body to forward there
// and the most it may bill (a *RequestError where r cannot be bounded, or
// asks for what m cannot serve).
func (r *Request) Prepare(m *Model, up Upstream) (*Prepared, error) {
	if !up.Serves(r.Endpoint) {
		return r.translate(m, up)
	}
	p := &Prepared{req: r}
	if err := r.passed(m); err != nil {
		return nil, err
	}
	if r.Endpoint == Messages {
		betas, err := m.betas(r.betas)
		if err != nil {
			return nil, err
		}
		p.Betas = betas
		p.LongContext = slices.Contains(r.betas, "context-1m-2025-08-07")
	}
	if err := r.read.refused(m); err != nil {
		return nil, err
	}
	in, audio, err := r.read.input(m)
	if err != nil {
		return nil, err
	}
	p.InputTokens = scale(in, m.TokenRatio)
	p.InputAudioTokens = min(scale(audio, m.TokenRatio), p.InputTokens)
	if c, ok := r.read.(interface{ caches(hour bool) bool }); ok {
		p.CacheWrites, p.CacheWrites1h = c.caches(false), c.caches(true)
	}
	if r.Endpoint == Embeddings {
		if !m.Embedding {
			return nil, badRequest("model", "%s is not an embedding model", m.Name)
		}
	} else {
		if m.Embedding {
			return nil, badRequest("model", "%s is an embedding model", m.Name)
		}
		if err := r.read.output(m, p); err != nil {
			return nil, err
		}
		if p.Choices > maxChoices {
			return nil, badRequest("n", "n × best_of × the number of prompts is %d; the gateway bounds a request at %d choices", p.Choices, maxChoices)
		}
		p.MaxOutputTokens = p.OutputCap*p.Choices + p.Predicted
		p.InputTokens = searchInput(m, p.InputTokens, p.MaxOutputTokens, p.WebSearches)
	}
	if m.Name != r.Model {
		p.set("model", quote(nil, m.Name))
	}
	p.Body = p.body()
	return p, nil
}

// passed refuses a top-level field the gateway does not know, unless m's
// upstream lets it pass.
func (r *Request) passed(m *Model) error {
	unknown := r.read.unknowns()
	if len(unknown) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(unknown))
	for _, name := range names {
		if m.Pass != nil && slices.Contains(m.Pass.Fields, name) {
			continue
		}
		return badRequest(name, "%s is not a field the gateway knows for %s requests: it forwards only fields whose cost it can bound (docs/bounds.md). "+
			"If the upstream bills nothing for it, its operator can let it pass unread with upstreams[].pass_fields: [%s], taking the bill's risk", name, r.Endpoint, name)
	}
	return nil
}

func (u *unknown) unknowns() map[string]jsontext.Value { return u.Unknown }

// capOutput sets the output cap, in field key: the client's (cap), which
// must be in [1, the model's maximum], or def, written into the body.
// write writes the client's cap too (it moved to another field).
func (p *Prepared) capOutput(m *Model, key string, cap *int64, def int64, write bool) error {
	limit := def
	if cap != nil {
		if *cap < 1 || *cap > m.MaxOutputTokens {
			return badRequest(key, "must be between 1 and %d", m.MaxOutputTokens)
		}
		limit = *cap
	}
	if cap == nil || write {
		p.set(key, strconv.AppendInt(nil, limit, 10))
	}
	p.CapField, p.OutputCap = key, limit
	return nil
}

// choicesOf is how many choices n and best_of (either may be unset) ask
// for, for each of prompts prompts.
func choicesOf(n, bestOf *int64, prompts int64) (int64, error) {
	c := int64(1)
	for _, f := range [...]struct {
		name string
		v    *int64
	}{{"n", n}, {"best_of", bestOf}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 || *f.v > 128 {
			return 0, badRequest(f.name, "must be between 1 and 128")
		}
		c = max(c, *f.v)
	}
	return c * max(prompts, 1), nil
}

// askUsage makes a stream of an OpenAI endpoint report its usage: the
// gateway asks for the final usage chunk (stream_options.include_usage),
// or, where the server reports it unasked and may refuse the field, sends
// none.
func (p *Prepared) askUsage(m *Model, opts *streamOptions) {
	switch {
	case m.StreamUsage == "always" || m.StreamUsage == "x_groq":
		p.del("stream_options")
		p.ClientWantsUsage = true
	case opts == nil:
		p.set("stream_options", []byte(`{"include_usage":true}`))
	default:
		p.ClientWantsUsage = opts.IncludeUsage != nil && *opts.IncludeUsage
		if p.ClientWantsUsage {
			return
		}
		v := []byte(`{"include_usage":true`)
		if len(opts.IncludeObfuscation) > 0 {
			v = append(append(v, `,"include_obfuscation":`...), opts.IncludeObfuscation...)
		}
		p.set("stream_options", append(v, '}'))
	}
}

// set gives field name the JSON value v in the forwarded body.
func (p *Prepared) set(name string, v []byte) {
	for i := range p.edits {
		if p.edits[i].name == name {
			p.edits[i].value = v
			return
		}
	}
	p.edits = append(p.edits, edit{name, v})
}

// del leaves field name out of the forwarded body, if it is there.
func (p *Prepared) del(name string) { p.set(name, nil) }

// body is the body to forward: the client's bytes as they are, or, where
// a field is set or left out, its top level written again — each member
// in its place, its value as sent or as set, then the fields added.
func (p *Prepared) body() []byte {
	if len(p.edits) == 0 {
		return p.req.body
	}
	edited := func(name string) (edit, bool) {
		for _, e := range p.edits {
			if e.name == name {
				return e, true
			}
		}
		return edit{}, false
	}
	top := members(p.req.body)
	b := make([]byte, 0, len(p.req.body)+64)
	b = append(b, '{')
	add := func(name string, v []byte) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = quote(b, name)
		b = append(append(b, ':'), v...)
	}
	for _, mb := range top {
		v := p.req.body[mb.from:mb.to]
		if e, ok := edited(mb.name); ok {
			if e.value == nil {
				continue
			}
			v = e.value
		}
		add(mb.name, v)
	}
	for _, e := range p.edits {
		if e.value != nil && !slices.ContainsFunc(top, func(m member) bool { return m.name == e.name }) {
			add(e.name, e.value)
		}
	}
	return append(b, '}')
}

// Clamp lowers the output cap per choice to limit, in the forwarded body
// and the bound: the gateway clamps a request to what a budget has left.
// It refuses a cap that is not lower than the one in force.
func (p *Prepared) Clamp(limit int64) error {
	if p.CapField == "" || limit < 1 || limit >= p.OutputCap {
		return &RequestError{Message: "the output cap " + strconv.FormatInt(limit, 10) + " is not below the request's " + strconv.FormatInt(p.OutputCap, 10)}
	}
	if p.Translation != nil {
		return p.encode(limit)
	}
	p.set(p.CapField, strconv.AppendInt(nil, limit, 10))
	p.Body, p.OutputCap = p.body(), limit
	p.MaxOutputTokens = limit*p.Choices + p.Predicted
	return nil
}

// betasOf is the anthropic-beta values of h: comma-separated, in one or
// more headers.
func betasOf(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out = append(out, b)
			}
		}
	}
	return out
}

// quote appends s as a JSON string (s is a name or a model: valid UTF-8).
func quote(dst []byte, s string) []byte {
	b, _ := jsontext.AppendQuote(dst, s)
	return b
}

// InputTokens bounds r's input at model m, as Prepare
// does, without an output cap: what Anthropic's count_tokens answers.
func (r *Request) InputTokens(m *Model) (int64, error) {
	if err := r.read.refused(m); err != nil {
		return 0, err
	}
	in, _, err := r.read.input(m)
	if err != nil {
		return 0, err
	}
	return scale(in, m.TokenRatio), nil
}
