package upstream

import (
	"encoding/json"
	"errors"
	"strconv"
	"unsafe"

	"github.com/tollgate-dev/tollgate/budget"
)

// wireUsage is OpenAI's usage block. Pointers tell a missing figure from 0.
type wireUsage struct {
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    *int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
		AudioTokens  *int64 `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
		AudioTokens     *int64 `json:"audio_tokens"`
	} `json:"completion_tokens_details"`
}

func set(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

var errNoUsage = errors.New("upstream: no usage reported")

// usage converts a wire usage block, refusing missing, negative or
// inconsistent figures.
func (w *wireUsage) usage() (budget.Usage, error) {
	if w == nil || w.PromptTokens == nil {
		return budget.Usage{}, errNoUsage
	}
	u := budget.Usage{InputTokens: *w.PromptTokens}
	if w.CompletionTokens != nil {
		u.OutputTokens = *w.CompletionTokens
	}
	if d := w.PromptTokensDetails; d != nil {
		set(&u.CachedInputTokens, d.CachedTokens)
		set(&u.InputAudioTokens, d.AudioTokens)
	}
	if d := w.CompletionTokensDetails; d != nil {
		set(&u.ReasoningTokens, d.ReasoningTokens)
		set(&u.OutputAudioTokens, d.AudioTokens)
	}
	if err := u.Validate(); err != nil {
		return budget.Usage{}, err
	}
	return u, nil
}

// UsageFromJSON extracts the usage of a non-streaming response body. ok is
// false when the body reports no valid usage.
//
// Only the usage object is validated and decoded. The rest of the body —
// it may be megabytes of embeddings — is walked at its top level only,
// from its end (see lastMember): its text is the upstream's encoder's,
// and what a client sent lies inside its strings, escaped, where no walk
// can mistake it for a member. Where the body names usage twice, the last
// is read, as encoding/json (and so a Go client) reads it. (The whole body
// was validated before: two thirds of the instructions of reading a chat
// answer's usage, for a check whose failure changed only which usage a
// malformed answer was charged.)
func UsageFromJSON(body []byte) (u budget.Usage, ok bool) {
	raw, ok := usageObject(body)
	if !ok {
		return budget.Usage{}, false
	}
	u, err := decodeUsage(raw)
	return u, err == nil
}

// usageObject is the value of body's last top-level member named usage
// (see lastMember), where it is an object and valid JSON: what each
// provider's non-streamed answer reports its usage in.
func usageObject(body []byte) (jnode, bool) {
	if len(body) == 0 {
		return jnode{}, false
	}
	s := unsafe.String(&body[0], len(body))
	at, end := lastMember(s, "usage")
	if at < 0 || s[at] != '{' {
		return jnode{}, false
	}
	raw := s[at:end]
	if ok, _ := validFind(raw, ""); !ok {
		return jnode{}, false
	}
	return jnode{raw, at}, true
}

// decodeUsage reads an OpenAI usage object (raw, valid JSON). Its common
// form — known fields, integers, no duplicate — is read directly; any
// other goes through encoding/json, whose reading the direct one equals
// (FuzzDecodeUsage).
func decodeUsage(raw jnode) (budget.Usage, error) {
	if u, ok := usageFields(raw); ok {
		if err := u.Validate(); err != nil {
			return budget.Usage{}, err
		}
		return u, nil
	}
	var w wireUsage
	if err := json.Unmarshal([]byte(raw.raw), &w); err != nil {
		return budget.Usage{}, err
	}
	return w.usage()
}

var (
	usageNames      = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"}
	promptDetails   = []string{"cached_tokens", "audio_tokens"}
	completeDetails = []string{"reasoning_tokens", "audio_tokens"}
)

// usageFields is wireUsage.usage of raw's common form, before validation;
// ok is false for any other form, and for a usage with no prompt_tokens.
func usageFields(raw jnode) (u budget.Usage, ok bool) {
	seen, ok := readFields(raw, usageNames, true, func(f int, v jnode) bool {
		ok := true
		switch f {
		case 0:
			u.InputTokens, ok = integer(v)
		case 1:
			u.OutputTokens, ok = integer(v)
		case 2:
			ok = details(v, promptDetails, &u.CachedInputTokens, &u.InputAudioTokens)
		case 3:
			ok = details(v, completeDetails, &u.ReasoningTokens, &u.OutputAudioTokens)
		}
		return ok
	})
	return u, ok && seen&1 != 0
}

// details reads an object of two integer fields, names, into a and b.
func details(v jnode, names []string, a, b *int64) bool {
	_, ok := readFields(v, names, true, func(f int, v jnode) bool {
		var ok bool
		if f == 0 {
			*a, ok = integer(v)
		} else {
			*b, ok = integer(v)
		}
		return ok
	})
	return ok
}

// integer is a JSON number that encoding/json decodes into an int64.
func integer(v jnode) (int64, bool) {
	if !v.isNumber() {
		return 0, false
	}
	n, err := strconv.ParseInt(v.raw, 10, 64)
	return n, err == nil
}
