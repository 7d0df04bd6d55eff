package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// silence is a PCM WAV file of 16-bit mono 24 kHz silence.
func silence(seconds float64) []byte {
	data := make([]byte, int(seconds*24000)*2)
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + len(data)))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(24000), uint32(48000), uint16(2), uint16(16)} {
		w(v)
	}
	b.WriteString("data")
	w(uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}

// Input audio is reserved as its playing time at the model's audio rate
// and settled at the audio price for the audio tokens the upstream
// reports, the rest of the prompt at the text price; audio output is taken
// only where the model prices it.
func TestAudioIsPricedAsAudio(t *testing.T) {
	_, upURL := simulatedUpstream(t, simulated.Options{APIKey: "upstream-key"})
	url, a := apptest.Serve(t, `
upstreams:
  - {name: openai, base_url: "`+upURL+`/v1", api_key: upstream-key, models: [gpt-4o-audio-preview, gpt-4o-mini]}
models:
  gpt-4o-audio-preview: {input: "$2", output: "$10", input_audio: "$40", output_audio: "$80"}
  gpt-4o-mini: {input: "$1", output: "$2"}
`+acmeML, nil)
	settled := recordSettlements(a)
	c := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0))

	clip := base64.StdEncoding.EncodeToString(silence(2.5))
	listen := openai.ChatCompletionNewParams{Model: "gpt-4o-audio-preview", MaxCompletionTokens: openai.Int(200),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is said in this clip?"),
			openai.InputAudioContentPart(openai.ChatCompletionContentPartInputAudioInputAudioParam{Data: clip, Format: "wav"})})}}
	resp, err := c.Chat.Completions.New(ctx, listen)
	if err != nil {
		t.Fatal(err)
	}
	audio := resp.Usage.PromptTokensDetails.AudioTokens
	if audio != 25 || resp.Choices[0].Message.Content == "" {
		t.Fatalf("audio tokens %d (want 25: 2.5 s at one per 100 ms), answer %q", audio, resp.Choices[0].Message.Content)
	}
	want := 2*(resp.Usage.PromptTokens-audio) + 40*audio + 10*resp.Usage.CompletionTokens
	spent, _ := spentNow(t, a)
	e := settled.wait(t, 1)[0]
	if spent != want || int64(e.Cost) != want || e.Cost > e.Reserved {
		t.Fatalf("spent %d, entry %+v; want %d µ$ (audio at $40, text at $2), within the reservation", spent, e, want)
	}
	// Reserved: the clip's bound (2.5 s × 20 tokens a second, rounded
	// up, + 1: 52) at $40, the cap at $10, and the text at $2 — a few
	// dozen µ$; at the audio price the text alone would be hundreds.
	if text := e.Reserved - 40*52 - 10*200; text <= 0 || text > 100 {
		t.Fatalf("reserved %d µ$, %d µ$ of it for the text: want the text priced as text", e.Reserved, text)
	}

	// Audio output: taken where the model prices it, refused where not.
	speak := openai.ChatCompletionNewParams{Model: "gpt-4o-audio-preview", MaxCompletionTokens: openai.Int(50),
		Modalities: []string{"text", "audio"},
		Audio:      openai.ChatCompletionAudioParam{Voice: openai.ChatCompletionAudioParamVoiceUnion{OfString: openai.String("alloy")}, Format: openai.ChatCompletionAudioParamFormatWAV},
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hi.")}}
	if _, err := c.Chat.Completions.New(ctx, speak); err != nil {
		t.Fatalf("audio output from a model that prices it: %v", err)
	}
	speak.Model = "gpt-4o-mini"
	_, err = c.Chat.Completions.New(ctx, speak)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "audio" || !strings.Contains(apiErr.Message, "output_audio") {
		t.Fatalf("audio output from a model without an audio price: %v", err)
	}
}
