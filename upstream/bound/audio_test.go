package bound

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// wav is a PCM WAV file of the given length; byteRate, if not 0, is
// written in place of the true one (a header that lies).
func wav(seconds float64, rate, channels, bits int, byteRate uint32) []byte {
	align := channels * bits / 8
	data := make([]byte, int(seconds*float64(rate))*align)
	if byteRate == 0 {
		byteRate = uint32(rate * align)
	}
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + len(data)))
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1))
	w(uint16(channels))
	w(uint32(rate))
	w(byteRate)
	w(uint16(align))
	w(uint16(bits))
	b.WriteString("data")
	w(uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}

// mp3 is n Layer III frames of MPEG-1 at 128 kbit/s and 44.1 kHz: each
// 417 bytes and 1,152 samples.
func mp3(n int) []byte {
	frame := make([]byte, 417)
	copy(frame, []byte{0xff, 0xfb, 0x90, 0x00})
	return bytes.Repeat(frame, n)
}

func TestAudioSeconds(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		format string
		data   []byte
		want   float64
	}{
		{"wav, 16-bit mono 24 kHz", "wav", wav(2.5, 24000, 1, 16, 0), 2.5},
		{"wav, stereo 44.1 kHz", "wav", wav(1, 44100, 2, 16, 0), 1},
		// A byte rate ten times the true one would make it a tenth as
		// long; the decoder plays it at its sample rate.
		{"wav whose byte rate lies", "wav", wav(3, 16000, 1, 16, 320000), 3},
		{"mp3, 100 frames", "mp3", mp3(100), 100 * 1152.0 / 44100},
		// An ID3v2 tag of 200 bytes (a syncsafe size: 1<<7 + 72) first.
		{"mp3 after an ID3 tag", "mp3", append(append([]byte("ID3\x04\x00\x00\x00\x00\x01\x48"), make([]byte, 200)...), mp3(50)...), 50 * 1152.0 / 44100},
		// Garbage a decoder might resync past: the size at 8 kbit/s.
		{"mp3 with garbage", "mp3", append(mp3(10), make([]byte, 1000)...), float64(10*417+1000) * 8 / 8000},
	} {
		got, err := audioSeconds(tc.format, tc.data)
		if err != nil || math.Abs(got-tc.want) > 0.01 {
			t.Errorf("%s: %.3f s, %v; want %.3f", tc.desc, got, err, tc.want)
		}
	}
	adpcm := wav(1, 8000, 1, 4, 0)
	adpcm[20] = 2 // format: Microsoft ADPCM
	for _, tc := range []struct {
		format string
		data   []byte
		want   string
	}{
		{"wav", adpcm, "compressed"},
		{"wav", []byte("RIFF....WAVE"), "not a WAV"},
		{"flac", []byte("fLaC"), "wav and mp3"},
	} {
		if _, err := audioSeconds(tc.format, tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.format, err, tc.want)
		}
	}
}

// An input_audio part is reserved as its longest playing time times the
// model's rate, and priced as audio; a model without a rate refuses it.
func TestInputAudioIsBounded(t *testing.T) {
	counter, err := tokenizer.Load("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Name: "gpt-4o-audio-preview", Counter: counter, MaxOutputTokens: 4096, DefaultOutputTokens: 512, AudioTokensPerSecond: 20}
	body := `{"model":"gpt-4o-audio-preview","messages":[{"role":"user","content":[{"type":"text","text":"What is said?"},` +
		`{"type":"input_audio","input_audio":{"format":"wav","data":"` + base64.StdEncoding.EncodeToString(wav(2.5, 24000, 1, 16, 0)) + `"}}]}]}`
	req, err := Parse(Chat, []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := req.Prepare(m, serveAll{})
	// 2.5 s and the header's 24 bytes past the fmt chunk, × 20, + 1.
	if err != nil || p.InputAudioTokens != 52 || p.InputTokens < 52+4 || p.AudioOutput {
		t.Fatalf("%v: %d audio tokens of %d, want 52", err, p.InputAudioTokens, p.InputTokens)
	}
	m.AudioTokensPerSecond = 0
	req, _ = Parse(Chat, []byte(body), nil)
	if _, err := req.Prepare(m, serveAll{}); err == nil || !strings.Contains(err.Error(), "audio_tokens_per_second") {
		t.Fatalf("a model without an audio rate: %v", err)
	}
	// Audio output only where the model prices it.
	ask := `{"model":"gpt-4o-audio-preview","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":"Hi"}]}`
	req, _ = Parse(Chat, []byte(ask), nil)
	if _, err := req.Prepare(m, serveAll{}); err == nil || !strings.Contains(err.Error(), "output_audio") {
		t.Fatalf("audio output without an audio price: %v", err)
	}
	m.AudioOutput = true
	req, _ = Parse(Chat, []byte(ask), nil)
	if p, err := req.Prepare(m, serveAll{}); err != nil || !p.AudioOutput {
		t.Fatalf("audio output with an audio price: %v", err)
	}
}

// FuzzAudioSeconds: no bytes panic the duration, and it is never negative.
func FuzzAudioSeconds(f *testing.F) {
	f.Add(true, wav(0.1, 8000, 1, 16, 0))
	f.Add(false, mp3(3))
	f.Fuzz(func(t *testing.T, isWAV bool, data []byte) {
		format := map[bool]string{true: "wav", false: "mp3"}[isWAV]
		if s, err := audioSeconds(format, data); err == nil && (s < 0 || math.IsNaN(s) || math.IsInf(s, 0)) {
			t.Fatalf("%s of %d bytes: %v s", format, len(data), s)
		}
	})
}
