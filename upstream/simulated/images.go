package simulated

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	_ "image/gif" // images clients send as data URLs
	_ "image/jpeg"
	_ "image/png"
	"math"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

// openAIImageTokens bills one image part as OpenAI's tile models do: a
// base, plus a figure per 512 px tile of the image fitted into 2048 px with
// its short side scaled down to 768 px; low detail is the base alone.
// gpt-4o-mini bills 2,833 and 5,667. An image given by URL is taken at the
// largest size (the server cannot fetch it), a data URL at its own size.
func openAIImageTokens(model, url, detail string) int64 {
	base, tile := int64(85), int64(170)
	if strings.Contains(model, "4o-mini") {
		base, tile = 2833, 5667
	}
	if detail == "low" {
		return base
	}
	w, h, ok := dataURLSize(url)
	if !ok {
		w, h = 2048, 768
	}
	if long := max(w, h); long > 2048 {
		w, h = w*2048/long, h*2048/long
	}
	if short := min(w, h); short > 768 {
		w, h = w*768/short, h*768/short
	}
	tiles := int64(math.Ceil(float64(w)/512) * math.Ceil(float64(h)/512))
	return base + tile*tiles
}

// claudeImageTokens bills an image as Anthropic documents: width × height /
// 750, after scaling to at most 1568 px on the long edge and 1.15
// megapixels; an image by URL is taken at the largest. On a high-resolution
// model (high: Claude Opus 4.7 and later, Sonnet 5, Haiku 5.5, Fable) it
// is ⌈w/28⌉ × ⌈h/28⌉ patches after fitting 2,576 px on the long edge, at
// most 4,784, and 3 tokens for the image block.
func claudeImageTokens(data string, high bool) int64 {
	w, h, ok := dataURLSize("data:;base64," + data)
	if high {
		if !ok {
			return claudeHighImage
		}
		if long := max(w, h); long > 2576 {
			w, h = w*2576/long, h*2576/long
		}
		patches := func() int64 { return int64((w+27)/28) * int64((h+27)/28) }
		for patches() > 4784 {
			w, h = w*99/100, h*99/100
		}
		return patches() + 3
	}
	if !ok {
		return 1600
	}
	if long := max(w, h); long > 1568 {
		w, h = w*1568/long, h*1568/long
	}
	if px := w * h; px > 1_150_000 {
		f := math.Sqrt(1_150_000 / float64(px))
		w, h = int(float64(w)*f), int(float64(h)*f)
	}
	return int64(math.Ceil(float64(w*h) / 750))
}

// claudeHighImage is the most an image costs on a high-resolution Claude.
const claudeHighImage = 4784 + 3

// claudeHighRes reports whether model takes high-resolution images: any
// Claude but the ones known to scale images to 1.15 megapixels (Claude 3,
// Claude 4 up to Opus 4.6, Sonnet 4.x, Haiku 4.x).
func claudeHighRes(model string) bool {
	m := strings.ToLower(model)
	for _, old := range []string{"claude-3", "claude-4-", "opus-4-2", "opus-4-1", "opus-4-5", "opus-4-6", "sonnet-4", "haiku-4", "haiku-3"} {
		if strings.Contains(m, old) {
			return false
		}
	}
	return !strings.Contains(m, "claude-opus-4@") && !strings.HasSuffix(m, "claude-opus-4")
}

// dataURLSize decodes the dimensions of a base64 data URL's image.
func dataURLSize(url string) (w, h int, ok bool) {
	_, data, found := strings.Cut(url, ";base64,")
	if !found || !strings.HasPrefix(url, "data:") {
		return 0, 0, false
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return 0, 0, false
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

// What a page of a PDF bills, in input tokens: Claude renders each page
// as an image and extracts its text (measured, 2,100 to 2,500 a page of
// text); OpenAI's models likewise; Gemini bills a page as an image at its
// default media resolution for documents.
const (
	claudePDFPage = 2400
	openAIPDFPage = 2000
	geminiPDFPage = 560
)

func init() { model.ConfigPath = "disable" } // pdfcpu writes no config directory

// pdfPageCount counts a base64 PDF's pages with pdfcpu, as a provider's
// own PDF reader would, independently of the gateway's count. A PDF it
// cannot read is billed as 1,000 pages, so a test that sends one fails
// loudly rather than pass with a bill of nothing.
func pdfPageCount(b64 string) int64 {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 1000
	}
	n, err := api.PageCount(bytes.NewReader(raw), model.NewDefaultConfiguration())
	if err != nil {
		return 1000
	}
	return int64(n)
}

// audioTokens is what OpenAI bills a clip of input audio: one token per
// 100 ms of a PCM WAV file as its header describes it (other formats are
// taken as a 16 kHz 16-bit mono stream).
func audioTokens(format, b64 string) int64 {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0
	}
	rate := 32000.0
	data := len(raw)
	if format == "wav" && len(raw) >= 44 {
		rate = float64(binary.LittleEndian.Uint32(raw[24:28]) * uint32(binary.LittleEndian.Uint16(raw[32:34])))
		data -= 44
	}
	if rate <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(data) / rate * 10))
}
