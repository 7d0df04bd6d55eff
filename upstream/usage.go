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
	raw, ok := lastUsage(body)
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
	raw, ok := lastUsage(body)
	if !ok {
		return jnode{}, false
	}
	if ok, _ := validFind(raw.raw, ""); !ok {
		return jnode{}, false
	}
	return raw, true
}

// lastUsage is usageObject before validation: the value of body's last
// top-level member named usage, where it starts as an object.
func lastUsage(body []byte) (jnode, bool) {
	if len(body) == 0 {
		return jnode{}, false
	}
	s := unsafe.String(&body[0], len(body))
	at, end := lastMember(s, "usage")
	if at < 0 || s[at] != '{' {
		return jnode{}, false
	}
	return jnode{s[at:end], at}, true
}

// decodeUsage reads an OpenAI usage object, raw, not yet validated. Its
// every-day form is read as it is checked, in one pass (usageFlat); any
// other is validated, then read: its common form — known fields,
// integers, no duplicate — directly, the rest through encoding/json,
// whose reading the direct ones equal (FuzzUsageFlat, FuzzDecodeUsage).
func decodeUsage(raw jnode) (budget.Usage, error) {
	u, ok := usageFlat(raw.raw)
	if !ok {
		if valid, _ := validFind(raw.raw, ""); !valid {
			return budget.Usage{}, errors.New("upstream: usage is not valid JSON")
		}
		if u, ok = usageFields(raw); !ok {
			var w wireUsage
			if err := json.Unmarshal([]byte(raw.raw), &w); err != nil {
				return budget.Usage{}, err
			}
			return w.usage()
		}
	}
	if err := u.Validate(); err != nil {
		return budget.Usage{}, err
	}
	return u, nil
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

// usageFlat reads an OpenAI usage object, s, in the form every answer has:
// names of lower-case letters and underscores, without escapes, none
// twice where the gateway reads it; integer values, or objects of such
// members (the *_details) — checking that form as it reads it, s being
// unvalidated. ok is false for any other text, JSON or not, which the
// general reading then takes (it validates first), and for a usage without
// prompt_tokens. Where ok, s is valid JSON and the usage is what
// encoding/json decodes (FuzzUsageFlat). Such a name folds to no other
// name (encoding/json matches names by case folding), and a number of at
// most 18 digits, without fraction or exponent, is an int64.
func usageFlat(s string) (u budget.Usage, ok bool) {
	i := ws(s, 0)
	if i >= len(s) || s[i] != '{' {
		return u, false
	}
	var seen uint
	for i = ws(s, i+1); ; {
		key, j := flatKey(s, i)
		if j < 0 {
			return u, false
		}
		f := -1
		for k, n := range usageNames {
			if n == key {
				f = k
			}
		}
		if f >= 0 {
			if seen&(1<<f) != 0 {
				return u, false
			}
			seen |= 1 << f
		}
		switch {
		case f == 0:
			u.InputTokens, j = flatInt(s, j)
		case f == 1:
			u.OutputTokens, j = flatInt(s, j)
		case f == 2:
			j = flatDetails(s, j, promptDetails, &u.CachedInputTokens, &u.InputAudioTokens)
		case f == 3:
			j = flatDetails(s, j, completeDetails, &u.ReasoningTokens, &u.OutputAudioTokens)
		case j < len(s) && s[j] == '{':
			j = flatObject(s, j, func(string, int64) bool { return true })
		default:
			_, j = flatInt(s, j)
		}
		if j < 0 {
			return u, false
		}
		if i = ws(s, j); i >= len(s) {
			return u, false
		}
		if s[i] == '}' {
			return u, ws(s, i+1) == len(s) && seen&1 != 0
		}
		if s[i] != ',' {
			return u, false
		}
		i = ws(s, i+1)
	}
}

// flatDetails reads a *_details object at i into a and b, its two names
// the gateway reads (neither twice); where it ends, or -1.
func flatDetails(s string, i int, names []string, a, b *int64) int {
	var seen uint
	return flatObject(s, i, func(key string, n int64) bool {
		var bit uint
		switch key {
		case names[0]:
			*a, bit = n, 1
		case names[1]:
			*b, bit = n, 2
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

// flatObject reads an object at i of flatKey names with flatInt values,
// each handed to set (false: give up); where it ends, or -1.
func flatObject(s string, i int, set func(key string, n int64) bool) int {
	if i >= len(s) || s[i] != '{' {
		return -1
	}
	if i = ws(s, i+1); i < len(s) && s[i] == '}' {
		return i + 1
	}
	for {
		key, j := flatKey(s, i)
		if j < 0 {
			return -1
		}
		var n int64
		if n, j = flatInt(s, j); j < 0 || !set(key, n) {
			return -1
		}
		if i = ws(s, j); i >= len(s) {
			return -1
		}
		switch s[i] {
		case ',':
			i = ws(s, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// flatKey reads a member's name at i (its opening quote) — lower-case
// ASCII letters and underscores, at least one — and its colon: the name,
// and where its value starts; -1 for anything else.
func flatKey(s string, i int) (key string, value int) {
	if i >= len(s) || s[i] != '"' {
		return "", -1
	}
	j := i + 1
	for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] == '_') {
		j++
	}
	if j == i+1 || j >= len(s) || s[j] != '"' {
		return "", -1
	}
	k := ws(s, j+1)
	if k >= len(s) || s[k] != ':' {
		return "", -1
	}
	return s[i+1 : j], ws(s, k+1)
}

// flatInt reads an integer at i — an optional minus, then 0 or up to 18
// digits not starting with 0, not followed by a fraction or exponent —:
// its value and where it ends; -1 for anything else.
func flatInt(s string, i int) (n int64, end int) {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	d := j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		n = n*10 + int64(s[j]-'0')
		j++
	}
	if j == d || j-d > 18 || s[d] == '0' && j-d > 1 || j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
		return 0, -1
	}
	if d > i {
		n = -n
	}
	return n, j
}
