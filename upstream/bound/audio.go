package bound

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
)

// audioSeconds is an upper bound on how long a clip of audio plays, from
// its bytes: a WAV file's data over its byte rate; an MP3's frames, each
// 1,152 samples (576 at MPEG-2 rates), walked from first to last — or,
// where the walk does not reach the end (a stream a decoder may resync
// into), its size at the lowest MP3 bitrate, 8 kbit/s.
func audioSeconds(format string, data []byte) (float64, error) {
	switch format {
	case "wav":
		return wavSeconds(data)
	case "mp3":
		if s, ok := mp3Seconds(data); ok {
			return s, nil
		}
		return float64(len(data)) * 8 / 8000, nil
	}
	return 0, errors.New("the gateway bounds wav and mp3 audio only")
}

func wavSeconds(b []byte) (float64, error) {
	if len(b) < 44 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return 0, errors.New("not a WAV file")
	}
	// Chunks follow the header: find "fmt " for the byte rate; every
	// byte after it may be sound.
	for i := 12; i+8 <= len(b); {
		id, size := string(b[i:i+4]), int(binary.LittleEndian.Uint32(b[i+4:i+8]))
		if id == "fmt " {
			return wavChunkSeconds(b, i)
		}
		if size < 0 || i+8+size < i {
			break
		}
		i += 8 + size + size%2
	}
	return 0, errors.New("the WAV file has no fmt chunk")
}

// wavChunkSeconds reads the fmt chunk at i. A decoder plays the file at
// its sample rate × block align (or channels × bits), which a header may
// state differently from its byte rate: the slowest of the three is
// taken, so the bound is the longest it can play. Compressed WAV (ADPCM,
// MP3 in WAV) plays longer per byte than its header says and is refused.
func wavChunkSeconds(b []byte, i int) (float64, error) {
	if i+24 > len(b) {
		return 0, errors.New("the WAV file's fmt chunk is cut short")
	}
	f := b[i+8:]
	format, channels := binary.LittleEndian.Uint16(f[0:2]), uint64(binary.LittleEndian.Uint16(f[2:4]))
	rate, byteRate := uint64(binary.LittleEndian.Uint32(f[4:8])), uint64(binary.LittleEndian.Uint32(f[8:12]))
	align, bits := uint64(binary.LittleEndian.Uint16(f[12:14])), uint64(binary.LittleEndian.Uint16(f[14:16]))
	if format != 1 && format != 3 && format != 0xfffe {
		return 0, errors.New("the WAV file is compressed (not PCM)")
	}
	slowest := uint64(math.MaxUint64)
	for _, r := range []uint64{byteRate, rate * align, rate * channels * bits / 8} {
		if r > 0 {
			slowest = min(slowest, r)
		}
	}
	if slowest == math.MaxUint64 {
		return 0, errors.New("the WAV file has no rate")
	}
	return float64(len(b)-i-8) / float64(slowest), nil
}

// mp3Seconds walks an MP3's frames; ok is false unless they run to the
// end of the data (an ID3v1 tag aside).
func mp3Seconds(b []byte) (seconds float64, ok bool) {
	i := 0
	if len(b) >= 10 && string(b[:3]) == "ID3" { // an ID3v2 tag: 28-bit size
		i = 10 + (int(b[6]&0x7f)<<21 | int(b[7]&0x7f)<<14 | int(b[8]&0x7f)<<7 | int(b[9]&0x7f))
	}
	end := len(b)
	if end >= 128 && string(b[end-128:end-125]) == "TAG" {
		end -= 128
	}
	frames := 0
	for i+4 <= end {
		n, secs := mp3Frame(b[i : i+4])
		if n == 0 {
			return 0, false
		}
		i += n
		seconds += secs
		frames++
	}
	return seconds, frames > 0 && i == end
}

var (
	mp3Bitrates = [2][16]int{ // kbit/s, Layer III: MPEG-1, MPEG-2/2.5
		{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0},
		{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},
	}
	mp3Rates = [4][3]int{{11025, 12000, 8000}, {}, {22050, 24000, 16000}, {44100, 48000, 32000}} // by version bits
)

// mp3Frame reads a Layer III frame header: the frame's length in bytes
// and its duration, or 0 if h is not one.
func mp3Frame(h []byte) (int, float64) {
	if h[0] != 0xff || h[1]&0xe0 != 0xe0 || (h[1]>>1)&3 != 1 {
		return 0, 0 // no sync, or not Layer III
	}
	version := int(h[1]>>3) & 3 // 0: MPEG-2.5, 2: MPEG-2, 3: MPEG-1
	bi, ri, pad := int(h[2]>>4), int(h[2]>>2)&3, int(h[2]>>1)&1
	if version == 1 || ri == 3 || bi == 0 || bi == 15 {
		return 0, 0
	}
	rate := mp3Rates[version][ri]
	samples, coef, table := 1152, 144, 0
	if version != 3 {
		samples, coef, table = 576, 72, 1
	}
	n := coef*mp3Bitrates[table][bi]*1000/rate + pad
	return n, float64(samples) / float64(rate)
}

// audio bounds an input_audio part: its duration times the model's audio
// tokens a second.
func (m *Model) audio(format, b64, param string) (int64, error) {
	if m.AudioTokensPerSecond <= 0 {
		return 0, badRequest(param, "%s is audio, and the model %s has no audio bound (set models.%s.audio_tokens_per_second): the gateway does not forward input it cannot price", param, m.Name, m.Name)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0, badRequest(param, "%s: the audio is not valid base64", param)
	}
	secs, err := audioSeconds(format, raw)
	if err != nil {
		return 0, badRequest(param+".format", "%s: %v, so the gateway cannot price it", param, err)
	}
	return int64(math.Ceil(secs*m.AudioTokensPerSecond)) + 1, nil
}
