package convert

import (
	"errors"
	"fmt"
	"strings"

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
	Has                                               Figures
}

// Figures is a set of usage figures.
type Figures uint8

const (
	HasInput Figures = 1 << iota
	HasCachedInput
	HasCacheWrite
	HasOutput
	HasReasoning
	HasInputAudio
	HasOutputAudio
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
		{HasOutputAudio, &u.OutputAudio, &later.OutputAudio},
	} {
		if later.Has&f.bit != 0 {
			*f.dst = *f.src
			u.Has |= f.bit
		}
	}
}

// maxFigure bounds a usage figure: no request takes a trillion tokens, and
// a figure past it is an upstream's error (or an attack through it), not
// a bill.
const maxFigure = 1 << 40

var errUsage = errors.New("convert: the usage figures are inconsistent")

// figure sets *dst from v, where v was reported: a count in [0, 2^40].
func (u *Usage) figure(bit Figures, dst *int64, v *int64) error {
	if v == nil {
		return nil
	}
	if *v < 0 || *v > maxFigure {
		return fmt.Errorf("convert: usage figure %d out of range", *v)
	}
	*dst += *v
	u.Has |= bit
	return nil
}

// ReadUsage reads a usage object of wire w (OpenAI's or the Responses
// API's usage, Anthropic's usage, Gemini's usageMetadata, Bedrock's
// usage), as json/v2 reads it: a name twice, a figure that is not a count,
// or parts larger than their whole make the answer unusable (an error),
// and it is settled as if it reported nothing.
func ReadUsage(w Wire, raw []byte) (Usage, error) {
	var u Usage
	var err error
	switch w {
	case OpenAI:
		err = u.openAI(raw)
	case Responses:
		err = u.responses(raw)
	case Anthropic:
		err = u.anthropic(raw)
	case Gemini:
		err = u.gemini(raw)
	case Converse:
		err = u.converse(raw)
	default:
		err = fmt.Errorf("convert: no usage reader for wire %v", w)
	}
	if err != nil {
		return Usage{}, err
	}
	if u.Has != 0 {
		u.Has |= absent[w] // a figure the wire has no field for is 0, and known to be
	}
	if u.CachedInput+u.CacheWrite+u.InputAudio > u.Input || u.Reasoning > u.Output || u.OutputAudio > u.Output {
		return Usage{}, errUsage
	}
	return u, nil
}

// absent are the figures a wire has no field for: OpenAI does not bill
// cache writes, Anthropic and Bedrock bill no audio and count thinking as
// output, Gemini bills no cache writes by the token.
var absent = map[Wire]Figures{
	OpenAI:    HasCacheWrite,
	Responses: HasCacheWrite | HasInputAudio | HasOutputAudio,
	Anthropic: HasReasoning | HasInputAudio | HasOutputAudio,
	Gemini:    HasCacheWrite,
	Converse:  HasReasoning | HasInputAudio | HasOutputAudio,
}

// fig is a figure of a usage: its bit, where it goes, the value read.
type fig struct {
	bit Figures
	dst *int64
	v   *int64
}

// figures sets each reported figure of u.
func (u *Usage) figures(fs ...fig) error {
	for _, f := range fs {
		if err := u.figure(f.bit, f.dst, f.v); err != nil {
			return err
		}
	}
	return nil
}

// openAI reads Chat Completions' (and completions', embeddings') usage.
func (u *Usage) openAI(raw []byte) error {
	var w struct {
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
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	fs := []fig{{HasInput, &u.Input, w.PromptTokens}, {HasOutput, &u.Output, w.CompletionTokens}}
	if d := w.PromptTokensDetails; d != nil {
		fs = append(fs, fig{HasCachedInput, &u.CachedInput, d.CachedTokens}, fig{HasInputAudio, &u.InputAudio, d.AudioTokens})
	}
	if d := w.CompletionTokensDetails; d != nil {
		fs = append(fs, fig{HasReasoning, &u.Reasoning, d.ReasoningTokens}, fig{HasOutputAudio, &u.OutputAudio, d.AudioTokens})
	}
	return u.figures(fs...)
}

// responses reads the Responses API's usage: input_tokens includes the
// cached ones, output_tokens the reasoning ones.
func (u *Usage) responses(raw []byte) error {
	var w struct {
		InputTokens        *int64 `json:"input_tokens"`
		OutputTokens       *int64 `json:"output_tokens"`
		InputTokensDetails *struct {
			CachedTokens *int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails *struct {
			ReasoningTokens *int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	fs := []fig{{HasInput, &u.Input, w.InputTokens}, {HasOutput, &u.Output, w.OutputTokens}}
	if d := w.InputTokensDetails; d != nil {
		fs = append(fs, fig{HasCachedInput, &u.CachedInput, d.CachedTokens})
	}
	if d := w.OutputTokensDetails; d != nil {
		fs = append(fs, fig{HasReasoning, &u.Reasoning, d.ReasoningTokens})
	}
	return u.figures(fs...)
}

// anthropic reads Anthropic's usage, whose input_tokens leaves out the
// tokens read from and written to the cache: Input is their sum, and is
// reported once input_tokens is.
func (u *Usage) anthropic(raw []byte) error {
	var w struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	if err := u.figures(fig{HasInput, &u.Input, w.InputTokens}, fig{HasOutput, &u.Output, w.OutputTokens},
		fig{HasCacheWrite, &u.CacheWrite, w.CacheCreationInputTokens}, fig{HasCachedInput, &u.CachedInput, w.CacheReadInputTokens}); err != nil {
		return err
	}
	if u.Has&HasInput != 0 {
		u.Input += u.CacheWrite + u.CachedInput
	}
	return nil
}

// gemini reads usageMetadata: thoughts bill as output, the prompt a
// tool's use added as input. Gemini leaves out a count that is 0 (an
// answer with no candidates has no candidatesTokenCount): where the total
// is there, the output is what it holds beyond the input.
func (u *Usage) gemini(raw []byte) error {
	type modality struct {
		Modality   string `json:"modality"`
		TokenCount *int64 `json:"tokenCount"`
	}
	var w struct {
		PromptTokenCount        *int64     `json:"promptTokenCount"`
		CandidatesTokenCount    *int64     `json:"candidatesTokenCount"`
		ThoughtsTokenCount      *int64     `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount *int64     `json:"toolUsePromptTokenCount"`
		CachedContentTokenCount *int64     `json:"cachedContentTokenCount"`
		TotalTokenCount         *int64     `json:"totalTokenCount"`
		PromptTokensDetails     []modality `json:"promptTokensDetails"`
		CandidatesTokensDetails []modality `json:"candidatesTokensDetails"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	if err := u.figures(fig{HasInput, &u.Input, w.PromptTokenCount}, fig{HasInput, &u.Input, w.ToolUsePromptTokenCount},
		fig{HasCachedInput, &u.CachedInput, w.CachedContentTokenCount}, fig{HasOutput, &u.Output, w.CandidatesTokenCount},
		fig{HasReasoning, &u.Reasoning, w.ThoughtsTokenCount}); err != nil {
		return err
	}
	if u.Has&HasReasoning != 0 {
		u.Output += u.Reasoning
	}
	if w.CandidatesTokenCount == nil && w.TotalTokenCount != nil && u.Has&HasInput != 0 {
		if *w.TotalTokenCount < u.Input || *w.TotalTokenCount > maxFigure {
			return errUsage
		}
		u.Output, u.Has = *w.TotalTokenCount-u.Input, u.Has|HasOutput
	}
	for _, d := range w.PromptTokensDetails {
		if d.Modality == "AUDIO" {
			if err := u.figure(HasInputAudio, &u.InputAudio, d.TokenCount); err != nil {
				return err
			}
		}
	}
	for _, d := range w.CandidatesTokensDetails {
		if d.Modality == "AUDIO" {
			if err := u.figure(HasOutputAudio, &u.OutputAudio, d.TokenCount); err != nil {
				return err
			}
		}
	}
	return nil
}

// converse reads Bedrock's usage, whose inputTokens leaves out the cache's
// as Anthropic's does.
func (u *Usage) converse(raw []byte) error {
	var w struct {
		InputTokens           *int64 `json:"inputTokens"`
		OutputTokens          *int64 `json:"outputTokens"`
		CacheReadInputTokens  *int64 `json:"cacheReadInputTokens"`
		CacheWriteInputTokens *int64 `json:"cacheWriteInputTokens"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	if err := u.figures(fig{HasInput, &u.Input, w.InputTokens}, fig{HasOutput, &u.Output, w.OutputTokens},
		fig{HasCachedInput, &u.CachedInput, w.CacheReadInputTokens}, fig{HasCacheWrite, &u.CacheWrite, w.CacheWriteInputTokens}); err != nil {
		return err
	}
	if u.Has&HasInput != 0 {
		u.Input += u.CacheWrite + u.CachedInput
	}
	return nil
}

// AnswerUsage reads the usage of a whole (not streamed) answer of wire w:
// its top-level member usage (usageMetadata for Gemini). An answer that is
// not JSON, or names a member twice, has none.
func AnswerUsage(w Wire, body []byte) (Usage, error) {
	var a struct {
		Usage         jsontext.Value `json:"usage"`
		UsageMetadata jsontext.Value `json:"usageMetadata"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return Usage{}, err
	}
	raw := a.Usage
	if w == Gemini {
		raw = a.UsageMetadata
	}
	if raw.Kind() != '{' {
		return Usage{}, errNoUsage
	}
	return ReadUsage(w, raw)
}

var errNoUsage = errors.New("convert: the answer reports no usage")

// String names the figures: "input,output,cached_input".
func (f Figures) String() string {
	var names []string
	for i, name := range [...]string{"input", "cached_input", "cache_write", "output", "reasoning", "input_audio", "output_audio"} {
		if f&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, ",")
}
