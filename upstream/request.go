package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tollgate-dev/tollgate/internal/jsonx"
	"github.com/tollgate-dev/tollgate/tokenizer"
)

// Endpoint is one OpenAI-compatible route.
type Endpoint uint8

const (
	Chat Endpoint = iota + 1
	Completions
	Embeddings
	// Messages is Anthropic's Messages API.
	Messages
	// Responses is OpenAI's Responses API.
	Responses
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

// RequestError is a client mistake in a request body: the gateway answers
// 400 with Param and Message and forwards nothing.
type RequestError struct {
	Param   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return "upstream: bad request: " + e.Message
	}
	return fmt.Sprintf("upstream: bad request: %s: %s", e.Param, e.Message)
}

// badRequest is a RequestError whose message names its field, whatever the
// caller wrote: "max_tokens must be an integer", not "must be an integer".
func badRequest(param, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	switch {
	case param == "" || strings.Contains(msg, param):
	case strings.HasPrefix(msg, "is ") || strings.HasPrefix(msg, "must "):
		msg = param + " " + msg
	default:
		msg = param + ": " + msg
	}
	return &RequestError{Param: param, Message: msg}
}

// Model is what estimating a request needs to know about its model.
type Model struct {
	Name                string
	Counter             *tokenizer.Counter
	MaxOutputTokens     int64
	DefaultOutputTokens int64
	// ImageTokens bounds one input image (the largest the model takes);
	// 0 refuses images. ImageTokensLow, if set, bounds a low-detail one.
	ImageTokens    int64
	ImageTokensLow int64
	// PDFPageTokens bounds one page of an inline PDF; 0 refuses PDFs.
	PDFPageTokens int64
	// AudioTokensPerSecond bounds input audio; 0 refuses audio.
	AudioTokensPerSecond float64
	// AudioOutput says the model prices audio output: a request may ask
	// for it.
	AudioOutput bool
	Embedding   bool
	// TokenRatio (≥ 1) scales the BPE count into an upper bound for a
	// model whose tokenizer is not public; 0 or 1 means exact.
	TokenRatio float64
	// CapField is the chat output cap the upstream honours
	// ("max_tokens"), when it is not OpenAI's own choice of either
	// (catalog.Preset): the forwarded body carries the cap in it, whatever
	// field the client used — a cap the server ignored would leave the
	// output unbounded.
	CapField string
	// StreamUsage is how the upstream's streams report usage:
	// "stream_options" (the default: the gateway asks for it), "always" or
	// "x_groq" (it comes unasked, and stream_options is not sent).
	StreamUsage string
}

// Request is a decoded client request. Its top-level fields are kept as raw
// JSON so that the forwarded body is exactly what was estimated: duplicate
// keys collapse to the one the gateway read, and keys are matched exactly
// (encoding/json's case-insensitive struct matching would read "Max_Tokens"
// where the upstream would not).
type Request struct {
	Endpoint Endpoint
	Model    string
	Stream   bool
	// User is the request's "user" field, if any.
	User   string
	fields fieldSet
	// raw is the body as the client sent it (a translation reads it);
	// members are its top-level members in order, and changed says a
	// field was set or deleted since: the forwarded body is raw itself
	// until something changes, and raw with the changes spliced in after.
	raw     []byte
	members []member
	changed bool
	// prompts is how many prompts a legacy completions request holds:
	// each gets its own choices.
	prompts int64
	// audio is the audio part of the counted input, in tokens.
	audio int64
	// capKey is the output cap's field, once Prepare has read it.
	capKey string
	// msgs are a chat request's messages as ParseRequest decoded them
	// while checking them, and msgsOf the text they were decoded from:
	// the estimate takes them only while the messages field is that very
	// text (a later duplicate, or a rewrite, is another), else decodes the
	// field itself.
	msgs   []chatMessage
	msgsOf string
	// memberBuf and fieldBuf hold the members and fields of a body of a
	// usual size, in the request's own allocation.
	memberBuf [10]member
	fieldBuf  [10]fieldEntry
}

// member is one top-level member of the client's body: its key, and
// where its key (quoted, as written) and its value are in the body.
type member struct {
	key                      string
	keyFrom, keyTo, from, to int
}

// ParseRequest decodes a client body for endpoint e: it validates the
// body, noting its top-level members on the way, then reads them in place,
// checking every key the gateway reads for case (see shape). Each field's
// raw value is a slice of body; nothing is copied or decoded that the
// estimate does not read.
func ParseRequest(e Endpoint, body []byte) (*Request, error) {
	r := &Request{Endpoint: e, raw: body}
	r.members, r.fields = r.memberBuf[:0], r.fieldBuf[:0]
	// The validating scan notes the top-level members as it passes them.
	if len(body) == 0 || !root(body).isObject() || !validTop(unsafe.String(&body[0], len(body)), &r.members) {
		return nil, badRequest("", "the body is not a JSON object")
	}
	s, ok := shapes[e]
	if !ok {
		return nil, fmt.Errorf("upstream: no shape for endpoint %v", e)
	}
	text := unsafe.String(&body[0], len(body))
	for i := range r.members {
		m := &r.members[i]
		k, v := jnode{text[m.keyFrom:m.keyTo], m.keyFrom}, jnode{text[m.from:m.to], m.from}
		var key string
		var err error
		if e == Chat && k.raw == `"messages"` {
			key, err = "messages", r.checkMessages(v)
		} else {
			key, err = s.member(k, v, "", -1)
		}
		if err != nil {
			return nil, err
		}
		m.key = key
		// A later duplicate wins, as encoding/json reads it: the earlier
		// one is not forwarded (see body).
		if r.fields.put(key, body[m.from:m.to:m.to]) {
			r.changed = true // the body is rewritten without the earlier one
		}
	}
	if err := r.str("model", &r.Model); err != nil {
		return nil, err
	}
	if r.Model == "" {
		return nil, badRequest("model", "is required")
	}
	if e == Messages {
		r.User = gjsonString(r.fields.raw("metadata"), "user_id")
	} else if err := r.str("user", &r.User); err != nil {
		return nil, err
	}
	if raw, ok := r.fields.get("stream"); ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &r.Stream); err != nil {
			return nil, badRequest("stream", "must be a boolean")
		}
		if r.Stream && e == Embeddings {
			return nil, badRequest("stream", "embeddings cannot stream")
		}
	}
	return r, nil
}

// A fieldSet is a body's top-level fields by name: a handful, which a
// slice holds in less time and memory than a map.
type fieldSet []fieldEntry

type fieldEntry struct {
	key string
	val json.RawMessage
}

// get is the value of field key.
func (f fieldSet) get(key string) (json.RawMessage, bool) {
	for i := range f {
		if f[i].key == key {
			return f[i].val, true
		}
	}
	return nil, false
}

// raw is the value of field key, or nil.
func (f fieldSet) raw(key string) json.RawMessage {
	v, _ := f.get(key)
	return v
}

// put sets field key to v; replaced reports whether it was set before.
func (f *fieldSet) put(key string, v json.RawMessage) (replaced bool) {
	for i := range *f {
		if (*f)[i].key == key {
			(*f)[i].val = v
			return true
		}
	}
	*f = append(*f, fieldEntry{key, v})
	return false
}

// del removes field key; ok reports whether it was there.
func (f *fieldSet) del(key string) (ok bool) {
	for i := range *f {
		if (*f)[i].key == key {
			*f = slices.Delete(*f, i, i+1)
			return true
		}
	}
	return false
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func (r *Request) str(key string, dst *string) error {
	raw, ok := r.fields.get(key)
	if !ok || isNull(raw) {
		return nil
	}
	v, ok := jsonStr(raw)
	if !ok {
		return badRequest(key, "must be a string")
	}
	*dst = strings.Clone(v) // v points into the body
	return nil
}

// Prepared is a request ready to forward, with its upper bound.
type Prepared struct {
	// Body is the rewritten request: an explicit output cap and, when
	// streaming, stream_options.include_usage.
	Body []byte
	// InputTokens is the counted prompt.
	InputTokens int64
	// MaxOutputTokens bounds the output of all choices together:
	// OutputCap × Choices + Predicted.
	MaxOutputTokens int64
	// OutputCap is the output cap per choice written in Body.
	OutputCap int64
	// Choices is how many outputs are generated (n, best_of, × prompts).
	Choices int64
	// Predicted is the output a predicted output may add beyond the cap.
	Predicted int64
	// ClientWantsUsage is true when the client itself asked for the final
	// usage chunk of a stream; otherwise the gateway strips it.
	ClientWantsUsage bool
	// InputAudioTokens is the part of InputTokens that is audio, and
	// AudioOutput whether the request asks for audio output: the rest
	// of the bound is priced as text.
	InputAudioTokens int64
	AudioOutput      bool
	// Translation, when set, says the upstream speaks another wire than
	// the client: Body is in the upstream's, and the answer must come
	// back through it.
	Translation *Translation
}

// Prepare estimates r against m and rewrites it so the estimate is an upper
// bound: a missing output cap is set to the model's default, and a stream
// asks for its usage.
func (r *Request) Prepare(m *Model) (*Prepared, error) {
	p := &Prepared{}
	var err error
	switch r.Endpoint {
	case Chat:
		p.InputTokens, err = r.chatInput(m)
	case Completions:
		p.InputTokens, r.prompts, err = r.promptInput(m, "prompt")
		if err == nil {
			var suffix string
			if err = r.str("suffix", &suffix); err == nil {
				p.InputTokens += m.Counter.Count(suffix)
			}
		}
	case Embeddings:
		p.InputTokens, _, err = r.promptInput(m, "input")
	case Messages:
		p.InputTokens, err = r.messagesInput(m)
	case Responses:
		p.InputTokens, err = r.responsesInput(m)
	default:
		err = badRequest("", "unknown endpoint")
	}
	if err == nil {
		err = r.refuseUnbounded(m)
	}
	if err != nil {
		return nil, err
	}
	p.InputTokens = scale(p.InputTokens, m.TokenRatio)
	p.InputAudioTokens = min(scale(r.audio, m.TokenRatio), p.InputTokens)
	p.AudioOutput = r.Endpoint == Chat && r.asksAudio()
	if r.Endpoint != Embeddings {
		if m.Embedding {
			return nil, badRequest("model", "%s is an embedding model", m.Name)
		}
		if err := r.capOutput(m, p); err != nil {
			return nil, err
		}
	} else if !m.Embedding {
		return nil, badRequest("model", "%s is not an embedding model", m.Name)
	}
	switch {
	case r.Endpoint == Messages || r.Endpoint == Responses:
		p.ClientWantsUsage = true // these streams always carry usage: nothing to add or strip
	case r.Stream && (m.StreamUsage == "always" || m.StreamUsage == "x_groq"):
		// The server reports usage unasked and may refuse the field: the
		// client gets the usage either way.
		r.del("stream_options")
		p.ClientWantsUsage = true
	case r.Stream:
		if err := r.askUsage(p); err != nil {
			return nil, err
		}
	}
	p.Body = r.body()
	return p, nil
}

// set gives field key the raw value v in the forwarded body.
func (r *Request) set(key string, v json.RawMessage) {
	r.fields.put(key, v)
	r.changed = true
}

// del leaves field key out of the forwarded body.
func (r *Request) del(key string) {
	if r.fields.del(key) {
		r.changed = true
	}
}

// body is the body to forward: the client's bytes as they are, or, once a
// field changed, its members in their order — each key as written, its
// value as the gateway holds it — without the deleted ones and the
// earlier of duplicate keys, and the new fields after them (sorted).
// Whatever is forwarded is what the estimate read.
func (r *Request) body() []byte {
	if !r.changed {
		return r.raw
	}
	// A key sent twice goes once, where it was last. A body's few members
	// are searched pairwise; a map indexes many.
	var last map[string]int
	if len(r.members) > 16 {
		last = make(map[string]int, len(r.members))
		for i, m := range r.members {
			last[m.key] = i
		}
	}
	// lastAt is where key was sent last, or -1.
	lastAt := func(key string) int {
		if last != nil {
			if i, ok := last[key]; ok {
				return i
			}
			return -1
		}
		for i := len(r.members) - 1; i >= 0; i-- {
			if r.members[i].key == key {
				return i
			}
		}
		return -1
	}
	b := make([]byte, 0, len(r.raw)+64)
	b = append(b, '{')
	for i, m := range r.members {
		v, ok := r.fields.get(m.key)
		if !ok || lastAt(m.key) != i {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, r.raw[m.keyFrom:m.keyTo]...)
		b = append(b, ':')
		b = append(b, v...)
	}
	var added []fieldEntry
	for _, f := range r.fields {
		if lastAt(f.key) < 0 {
			added = append(added, f)
		}
	}
	slices.SortFunc(added, func(a, b fieldEntry) int { return strings.Compare(a.key, b.key) })
	for _, f := range added {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, f.key) // the gateway's own keys: plain ASCII
		b = append(b, ':')
		b = append(b, f.val...)
	}
	return append(b, '}')
}

// encode marshals v without HTML escaping, so text inside the forwarded body
// (and the token count of any JSON the estimate read) stays byte for byte
// what the client sent.
func encode(v any) ([]byte, error) { return jsonx.Marshal(v) }

// capOutput validates or sets the output cap and multiplies it by the
// number of choices generated.
func (r *Request) capOutput(m *Model, p *Prepared) error {
	key := "max_tokens"
	if r.Endpoint == Messages {
		if raw, ok := r.fields.get("max_tokens"); !ok || isNull(raw) {
			return badRequest("max_tokens", "is required")
		}
	}
	if r.Endpoint == Responses {
		key = "max_output_tokens"
	}
	if r.Endpoint == Chat {
		if _, ok := r.fields.get("max_tokens"); ok {
			if _, both := r.fields.get("max_completion_tokens"); both {
				return badRequest("max_tokens", "set max_tokens or max_completion_tokens, not both")
			}
		} else {
			key = "max_completion_tokens"
		}
	}
	if r.Endpoint == Chat && m.CapField == "max_tokens" && key == "max_completion_tokens" {
		// The server reads max_tokens: the cap moves there.
		if raw, ok := r.fields.get(key); ok {
			r.set("max_tokens", raw)
			r.del(key)
		}
		key = "max_tokens"
	}
	limit, set, err := r.positiveInt(key, m.MaxOutputTokens)
	if err != nil {
		return err
	}
	if !set {
		limit = m.DefaultOutputTokens
		if r.Endpoint == Completions {
			// The legacy API's own default is 16; writing a larger cap
			// would change what the client gets.
			limit = min(16, m.MaxOutputTokens)
		}
		r.set(key, json.RawMessage(strconv.FormatInt(limit, 10)))
	}
	choices, _, err := r.positiveInt("n", 128)
	if err != nil {
		return err
	}
	if r.Endpoint == Completions || r.Endpoint == Chat {
		// best_of is the legacy API's; OpenAI-compatible servers (vLLM)
		// take it on chat too, and bill every candidate.
		bestOf, _, err := r.positiveInt("best_of", 128)
		if err != nil {
			return err
		}
		choices = max(choices, bestOf)
	}
	// Every prompt of a legacy completions request gets n (best_of)
	// choices of its own.
	choices = max(choices, 1) * max(r.prompts, 1)
	if choices > maxChoices {
		return badRequest("n", "n × best_of × the number of prompts is %d; the gateway bounds a request at %d choices", choices, maxChoices)
	}
	r.capKey = key
	p.OutputCap, p.Choices, p.Predicted = limit, choices, r.predicted(m)
	p.MaxOutputTokens = limit*choices + p.Predicted
	return nil
}

// SetOutputCap writes a lower output cap (per choice) into the forwarded
// body of p and its bound: the gateway clamps a request to what a budget
// has left. It refuses a cap that is not lower than the one in force.
func (r *Request) SetOutputCap(p *Prepared, limit int64) error {
	if r.capKey == "" || limit < 1 || limit >= p.OutputCap {
		return fmt.Errorf("upstream: output cap %d is not in [1, %d)", limit, p.OutputCap)
	}
	if p.Translation != nil {
		return p.encode(limit)
	}
	r.set(r.capKey, json.RawMessage(strconv.FormatInt(limit, 10)))
	p.Body, p.OutputCap = r.body(), limit
	p.MaxOutputTokens = limit*p.Choices + p.Predicted
	return nil
}

// CapField is the name of the request's output cap field (max_tokens,
// max_completion_tokens or max_output_tokens); empty for embeddings.
func (r *Request) CapField() string { return r.capKey }

// maxChoices bounds the choices one request may generate: each prompt × n
// (or best_of).
const maxChoices = 128 * 128

// positiveInt reads an optional integer field in [1, maxValue].
func (r *Request) positiveInt(key string, maxValue int64) (v int64, set bool, err error) {
	raw, ok := r.fields.get(key)
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	var f float64
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && -1<<53 <= n && n <= 1<<53 {
		f = float64(n) // the common spelling: exact, with no need for encoding/json
	} else if f, err = unmarshalJSON[float64](raw); err != nil || f != math.Trunc(f) {
		return 0, false, badRequest(key, "must be an integer")
	}
	if f < 1 || f > float64(maxValue) {
		return 0, false, badRequest(key, "must be between 1 and %d", maxValue)
	}
	return int64(f), true, nil
}

func (r *Request) askUsage(p *Prepared) error {
	raw, ok := r.fields.get("stream_options")
	if !ok || isNull(raw) {
		// The common request: no options of its own. What encode makes
		// of {include_usage: true}, without a map and an encoder.
		r.set("stream_options", json.RawMessage(`{"include_usage":true}`))
		return nil
	}
	opts := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &opts); err != nil {
		return badRequest("stream_options", "must be an object")
	}
	if raw, ok := opts["include_usage"]; ok {
		if err := json.Unmarshal(raw, &p.ClientWantsUsage); err != nil {
			return badRequest("stream_options.include_usage", "must be a boolean")
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	b, err := encode(opts)
	if err != nil {
		return err
	}
	r.set("stream_options", b)
	return nil
}

// scale returns ceil(n × ratio) for a ratio above 1.
func scale(n int64, ratio float64) int64 {
	if ratio <= 1 {
		return n
	}
	return int64(math.Ceil(float64(n) * ratio))
}

// SameRequest reports whether a request prepared for m is prepared the
// same for o: the same model, counted and capped alike.
func (m *Model) SameRequest(o *Model) bool { return *m == *o }

// SetModel makes r a request for model (the model an alias's deployment
// is called at its upstream).
func (r *Request) SetModel(model string) error {
	raw, err := json.Marshal(model)
	if err != nil {
		return err
	}
	r.set("model", raw)
	r.Model = model
	return nil
}
