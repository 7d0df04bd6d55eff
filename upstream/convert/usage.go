package convert

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Usage is what the upstream reported, in the canonical split: Input counts
// every prompt token (cached and cache-written included), Output every
// generated one (reasoning included). Has says which figures the upstream
// reported: one it did not report is 0 here and missing from Has — never a
// reported 0 (bound.Prepared.Charge settles it at the most it can be).
type Usage struct {
	Input, CachedInput, CacheWrite, Output, Reasoning int64
	InputAudio, OutputAudio                           int64
	// CacheWrite1h is the part of CacheWrite written for an hour.
	CacheWrite1h int64
	// WebSearches are the web searches the provider ran (Anthropic's
	// server_tool_use.web_search_requests), each billed a fee.
	WebSearches int64
	Has         Figures
	// Speed and Geo are the speed and region Anthropic reports the answer
	// ran at (usage.speed: "standard" or "fast"; usage.inference_geo),
	// which its bill follows; "" where not reported.
	Speed, Geo string
}

// Figures is a set of usage figures.
type Figures uint16

const (
	HasInput Figures = 1 << iota
	HasCachedInput
	HasCacheWrite
	HasOutput
	HasReasoning
	HasInputAudio
	HasOutputAudio
	HasCacheWrite1h
	HasWebSearches
)

// Reported says the upstream reported a usage at all.
func (u Usage) Reported() bool { return u.Has != 0 }

// Update takes the figures later reports; the others stay (a stream
// reports its input first, its output as it goes).
func (u *Usage) Update(later Usage) {
	for _, f := range [...]struct {
		bit      Figures
		dst, src *int64
	}{
		{HasInput, &u.Input, &later.Input}, {HasCachedInput, &u.CachedInput, &later.CachedInput},
		{HasCacheWrite, &u.CacheWrite, &later.CacheWrite}, {HasOutput, &u.Output, &later.Output},
		{HasReasoning, &u.Reasoning, &later.Reasoning}, {HasInputAudio, &u.InputAudio, &later.InputAudio},
		{HasOutputAudio, &u.OutputAudio, &later.OutputAudio}, {HasCacheWrite1h, &u.CacheWrite1h, &later.CacheWrite1h},
		{HasWebSearches, &u.WebSearches, &later.WebSearches},
	} {
		if later.Has&f.bit != 0 {
			*f.dst = *f.src
			u.Has |= f.bit
		}
	}
	u.Speed, u.Geo = cmp.Or(later.Speed, u.Speed), cmp.Or(later.Geo, u.Geo)
}

// maxFigure bounds a usage figure: no request takes a trillion tokens, and
// a figure past it is an upstream's error (or an attack through it), not
// a bill.
const maxFigure = 1 << 40

var errUsage = errors.New("convert: the usage figures are inconsistent")

// ReadUsage reads a usage object of wire w (OpenAI's or the Responses
// API's usage, Anthropic's usage, Gemini's usageMetadata, Bedrock's
// usage) with json/v2's tokenizer: every figure the wire reports, each
// where its layout says it is. A name twice, a figure that is not a count
// (or null: not reported), or parts larger than their whole make the
// answer unusable (an error), and it is settled as if it reported nothing.
func ReadUsage(w Wire, raw []byte) (Usage, error) {
	layout, ok := layouts[w]
	if !ok {
		return Usage{}, fmt.Errorf("convert: no usage reader for wire %v", w)
	}
	var r reading
	dec := decoders.Get().(*decoder)
	dec.in.Reset()
	dec.in.Write(raw)
	dec.Reset(&dec.in)
	err := r.read(dec.Decoder, layout, "")
	if err == nil {
		_, err = dec.ReadToken() // the end: nothing may follow the object
		if err == io.EOF {
			err = nil
		} else if err == nil {
			err = errUsage
		}
	}
	if dec.in.Cap() <= 64<<10 { // a usage is some hundred bytes: not an odd answer's kept
		decoders.Put(dec)
	}
	if err != nil {
		return Usage{}, err
	}
	u := r.Usage
	switch w {
	case Anthropic, Converse:
		// input_tokens leaves out the tokens read from and written to the
		// cache: Input is their sum, reported once input_tokens is.
		if u.Has&HasInput != 0 {
			u.Input += u.CacheWrite + u.CachedInput
		}
	case Gemini:
		// Thoughts bill as output; and Gemini leaves out a count that is 0
		// (an answer with no candidates has no candidatesTokenCount):
		// where the total is there, the output is what it holds beyond
		// the input.
		u.Output += u.Reasoning
		if u.Has&HasOutput == 0 && r.total != nil && u.Has&HasInput != 0 {
			if *r.total < u.Input || *r.total > maxFigure {
				return Usage{}, errUsage
			}
			u.Output, u.Has = *r.total-u.Input, u.Has|HasOutput
		}
	}
	if u.Has != 0 {
		u.Has |= absent[w] // a figure the wire has no field for is 0, and known to be
	}
	if u.CachedInput+u.CacheWrite+u.InputAudio > u.Input || u.Reasoning > u.Output || u.OutputAudio > u.Output || u.CacheWrite1h > u.CacheWrite {
		return Usage{}, errUsage
	}
	return u, nil
}

// decoder is a json/v2 decoder with its input, a copy of the usage read:
// both are reused, a usage is read at every request.
type decoder struct {
	*jsontext.Decoder
	in bytes.Buffer
}

var decoders = sync.Pool{New: func() any {
	d := new(decoder)
	d.Decoder = jsontext.NewDecoder(&d.in)
	return d
}}

// layouts are where each wire reports each figure: by the name of the
// object a figure's member is in ("" the usage itself), then by the
// member's name. Gemini's modalities (promptTokensDetails,
// candidatesTokensDetails: [{modality, tokenCount}]) add their AUDIO counts
// to the audio figures; its totalTokenCount stands in for a
// candidatesTokenCount it leaves out.
var layouts = map[Wire]map[string]map[string]Figures{
	OpenAI: {
		"":                          {"prompt_tokens": HasInput, "completion_tokens": HasOutput},
		"prompt_tokens_details":     {"cached_tokens": HasCachedInput, "audio_tokens": HasInputAudio},
		"completion_tokens_details": {"reasoning_tokens": HasReasoning, "audio_tokens": HasOutputAudio},
	},
	Responses: {
		"":                      {"input_tokens": HasInput, "output_tokens": HasOutput},
		"input_tokens_details":  {"cached_tokens": HasCachedInput},
		"output_tokens_details": {"reasoning_tokens": HasReasoning},
	},
	Anthropic: {
		"": {"input_tokens": HasInput, "output_tokens": HasOutput,
			"cache_creation_input_tokens": HasCacheWrite, "cache_read_input_tokens": HasCachedInput},
		// The cache writes by TTL; the five-minute ones are the rest.
		"cache_creation": {"ephemeral_1h_input_tokens": HasCacheWrite1h},
		// The server tools' calls billed per call.
		"server_tool_use": {"web_search_requests": HasWebSearches},
	},
	Gemini: {
		"": {"promptTokenCount": HasInput, "toolUsePromptTokenCount": HasInput,
			"cachedContentTokenCount": HasCachedInput, "candidatesTokenCount": HasOutput,
			"thoughtsTokenCount": HasReasoning},
		"promptTokensDetails":     {"AUDIO": HasInputAudio},
		"candidatesTokensDetails": {"AUDIO": HasOutputAudio},
	},
	Converse: {
		"": {"inputTokens": HasInput, "outputTokens": HasOutput,
			"cacheReadInputTokens": HasCachedInput, "cacheWriteInputTokens": HasCacheWrite},
	},
}

// reading is a usage as it is read; total is Gemini's totalTokenCount,
// where it is given.
type reading struct {
	Usage
	total *int64
}

// read reads the object d is at, whose name is parent ("" the usage
// itself), into u's figures.
func (u *reading) read(d *jsontext.Decoder, layout map[string]map[string]Figures, parent string) error {
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return cmp.Or(err, errUsage)
	}
	for d.PeekKind() == '"' {
		// The name, unquoted into a buffer rather than made a string:
		// most are looked up, not kept.
		quoted, err := d.ReadValue()
		if err != nil {
			return err
		}
		var buf [48]byte
		name, err := jsontext.AppendUnquote(buf[:0], quoted)
		if err != nil {
			return err
		}
		switch kind := d.PeekKind(); {
		case kind == '{' && parent == "":
			err = u.read(d, layout, string(name))
		case kind == '[' && bytes.HasSuffix(name, []byte("TokensDetails")):
			err = u.modalities(d, layout[string(name)])
		case kind == '"' && parent == "" && (string(name) == "speed" || string(name) == "inference_geo"):
			var v []byte
			if v, err = d.ReadValue(); err == nil {
				var s []byte
				if s, err = jsontext.AppendUnquote(nil, v); err == nil && len(s) <= 32 {
					if string(name) == "speed" {
						u.Speed = string(s)
					} else {
						u.Geo = string(s)
					}
				}
			}
		case kind == '0' && parent == "" && string(name) == "totalTokenCount":
			var n int64
			n, err = integer(d)
			u.total = &n
		default:
			bit, ok := layout[parent][string(name)]
			if !ok {
				err = d.SkipValue()
				break
			}
			err = u.figure(d, bit)
		}
		if err != nil {
			return err
		}
	}
	_, err := d.ReadToken() // the object's end
	return err
}

// modalities reads Gemini's per-modality counts, an array of
// {modality, tokenCount}, into the figures their modality is in layout.
func (u *reading) modalities(d *jsontext.Decoder, layout map[string]Figures) error {
	var list []struct {
		Modality   string `json:"modality"`
		TokenCount *int64 `json:"tokenCount"`
	}
	if err := json.UnmarshalDecode(d, &list); err != nil {
		return err
	}
	for _, m := range list {
		if bit, ok := layout[m.Modality]; ok && m.TokenCount != nil {
			if err := u.add(bit, *m.TokenCount); err != nil {
				return err
			}
		}
	}
	return nil
}

// figure reads a count, or null (not reported), into figure bit.
func (u *reading) figure(d *jsontext.Decoder, bit Figures) error {
	if d.PeekKind() == 'n' {
		_, err := d.ReadToken()
		return err
	}
	n, err := integer(d)
	if err != nil {
		return err
	}
	return u.add(bit, n)
}

// add adds n to figure bit (a prompt's parts are added up), reported.
func (u *Usage) add(bit Figures, n int64) error {
	if n < 0 || n > maxFigure {
		return fmt.Errorf("convert: usage figure %d out of range", n)
	}
	switch bit {
	case HasInput:
		u.Input += n
	case HasCachedInput:
		u.CachedInput += n
	case HasCacheWrite:
		u.CacheWrite += n
	case HasOutput:
		u.Output += n
	case HasReasoning:
		u.Reasoning += n
	case HasInputAudio:
		u.InputAudio += n
	case HasOutputAudio:
		u.OutputAudio += n
	case HasCacheWrite1h:
		u.CacheWrite1h += n
	case HasWebSearches:
		u.WebSearches += n
	}
	u.Has |= bit
	return nil
}

// integer reads a JSON number that is an integer of at most 18 digits (a
// fraction or an exponent is not a count).
func integer(d *jsontext.Decoder) (int64, error) {
	v, err := d.ReadValue()
	if err != nil {
		return 0, err
	}
	if v.Kind() != '0' || len(v) > 18 || len(v) > 1 && v[0] == '0' {
		return 0, errUsage
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, errUsage
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// absent are the figures a wire has no field for: OpenAI does not bill
// cache writes, Anthropic and Bedrock bill no audio and count thinking as
// output, Gemini bills no cache writes by the token. Bedrock's one-hour
// cache writes are not absent: it reports no TTL breakdown, so a request
// that asked for an hour is charged its writes at the hour's rate. Web
// searches are reported by Anthropic's usage, and by the Responses API's
// output (withSearches); the gateway forwards a search to no other wire
// (bound.Prepared.WebSearches is 0 there).
var absent = map[Wire]Figures{
	OpenAI:    HasCacheWrite | HasCacheWrite1h | HasWebSearches,
	Responses: HasCacheWrite | HasCacheWrite1h | HasInputAudio | HasOutputAudio,
	Anthropic: HasReasoning | HasInputAudio | HasOutputAudio,
	Gemini:    HasCacheWrite | HasCacheWrite1h | HasWebSearches,
	Converse:  HasReasoning | HasInputAudio | HasOutputAudio | HasWebSearches,
}

// AnswerUsage reads the usage of a whole (not streamed) answer of wire w:
// its last top-level member usage (usageMetadata for Gemini), found as
// encoding/json would take it (lastMember) and read by ReadUsage. An
// answer without one, or with one that is not an object, has none.
//
// A Responses answer's web searches are counted from its output, as the
// stream's are from its last event's response (withSearches).
func AnswerUsage(w Wire, body []byte) (Usage, error) {
	key := "usage"
	if w == Gemini {
		key = "usageMetadata"
	}
	raw, ok := LastMember(body, key)
	if !ok || raw[0] != '{' {
		return Usage{}, errNoUsage
	}
	u, err := ReadUsage(w, raw)
	if err == nil && w == Responses {
		output, _ := LastMember(body, "output")
		u = u.withSearches(output)
	}
	return u, err
}

// withSearches is u with the web searches of a Responses answer whose
// output is output: OpenAI bills each web_search_call item (whatever its
// action: a search, a page opened, a find in a page — the dearer reading
// of a per-call price), and reports no count of them in the usage. Where
// output cannot be read (missing, or not an array of objects each with
// one type), u is left without the figure, which is then charged at the
// request's bound.
func (u Usage) withSearches(output []byte) Usage {
	var items []struct {
		Type string `json:"type"`
	}
	if len(output) == 0 || json.Unmarshal(output, &items) != nil {
		return u
	}
	u.WebSearches = 0
	for _, it := range items {
		if it.Type == "web_search_call" {
			u.WebSearches++
		}
	}
	u.Has |= HasWebSearches
	return u
}

// LastMember is the value of the last top-level member of an answer's
// JSON object named key — the one encoding/json takes —, found by walking
// the top level back from its end (lastMember); ok is false where there
// is none.
func LastMember(body []byte, key string) (value []byte, ok bool) {
	from, to := lastMember(string(body), key)
	if from < 0 {
		return nil, false
	}
	return body[from:to], true
}

var errNoUsage = errors.New("convert: the answer reports no usage")

// String names the figures: "input,output,cached_input".
func (f Figures) String() string {
	var names []string
	for i, name := range [...]string{"input", "cached_input", "cache_write", "output", "reasoning", "input_audio", "output_audio", "cache_write_1h", "web_searches"} {
		if f&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, ",")
}
