package bound

import (
	"bytes"
	"encoding/base64"
	"math"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// Model is what bounding a request needs to know of its model at one
// deployment: how its input is counted, its output capped, its media
// priced, and what its upstream lets pass unread.
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
	// WebSearch lets requests use Anthropic's web search (zero: refused).
	WebSearch WebSearch
	// FastMode and GeoUS are the multiples of the price, in thousandths,
	// that Anthropic's fast mode and US-only inference bill (6000, 1100);
	// 0 refuses them.
	FastMode, GeoUS int64
	// TokenRatio (≥ 1) scales Counter's count into a calibrated estimate
	// for a model whose tokenizer is not public and whose operator chose
	// one over the proof (a Counter that counts bytes); 0 or 1: as
	// counted.
	TokenRatio float64
	// CapField is the chat output cap the upstream honours ("max_tokens"),
	// when it is not OpenAI's own choice of either (catalog.Preset): the
	// forwarded body carries the cap in it, whatever field the client
	// used — a cap the server ignored would leave the output unbounded.
	CapField string
	// StreamUsage is how the upstream's streams report usage:
	// "stream_options" (the default: the gateway asks for it), "always" or
	// "x_groq" (it comes unasked, and stream_options is not sent).
	StreamUsage string
	// Pass is what the upstream's operator lets pass unread, taking the
	// bill's risk; nil lets nothing pass. Models of one upstream share it.
	Pass *Pass
}

// Pass names request fields, headers and beta values the gateway does not
// know, which an upstream lets pass unread (upstreams[].pass_fields,
// pass_headers, pass_betas).
type Pass struct {
	// Fields are top-level body fields.
	Fields []string
	// Headers are client headers forwarded as they are (canonical
	// names): OpenRouter's X-Title, OpenAI-Beta.
	Headers []string
	// Betas are anthropic-beta values.
	Betas []string
}

// SameRequest reports whether a request prepared for m is prepared the
// same for o: the same model, counted, capped and let pass alike.
func (m *Model) SameRequest(o *Model) bool { return *m == *o }

// image bounds one image: the model's figure for the largest image it
// takes, or its low-detail figure where the client asked for low detail.
// A model with no image figure refuses images: an image is never free.
func (m *Model) image(detail, param string) (int64, error) {
	if detail == "low" && m.ImageTokensLow > 0 {
		return m.ImageTokensLow, nil
	}
	if m.ImageTokens <= 0 {
		return 0, badRequest(param, "%s is an image, and the model %s has no image bound (set models.%s.image_tokens): the gateway does not forward input it cannot price", param, m.Name, m.Name)
	}
	return m.ImageTokens, nil
}

// file bounds a file part: a PDF inline, as a data URL. A file by id or
// URL is refused: its page count cannot be known here.
func (m *Model) file(data, id, param string) (int64, error) {
	if data == "" {
		what := "an uploaded file (file_id)"
		if id == "" {
			what = "a file by URL"
		}
		return 0, badRequest(param, "%s is %s, whose page count the gateway cannot know: send the PDF inline (file_data)", param, what)
	}
	media, b64, ok := strings.Cut(strings.TrimPrefix(data, "data:"), ";base64,")
	if !ok || media != "application/pdf" {
		return 0, badRequest(param, "%s: file_data must be a PDF as a data URL (data:application/pdf;base64,…)", param)
	}
	return m.pdf(b64, param)
}

// pdf bounds a PDF given in base64: its pages times the model's figure
// for a page. A PDF whose page count cannot be known is refused.
func (m *Model) pdf(b64, param string) (int64, error) {
	if m.PDFPageTokens <= 0 {
		return 0, badRequest(param, "%s is a PDF, and the model %s has no page bound (set models.%s.pdf_page_tokens): the gateway does not forward input it cannot price", param, m.Name, m.Name)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0, badRequest(param, "%s: the PDF is not valid base64", param)
	}
	pages, err := pdfPages(raw)
	if err != nil {
		return 0, badRequest(param, "%s: %v, so the gateway cannot price it", param, err)
	}
	return pages * m.PDFPageTokens, nil
}

// scale returns ceil(n × ratio) for a ratio above 1.
func scale(n int64, ratio float64) int64 {
	if ratio <= 1 {
		return n
	}
	return int64(math.Ceil(float64(n) * ratio))
}

// compact is v's JSON text without white space: what the model is shown
// of a tool or a call is no longer than it, and so no more tokens.
func compact(v jsontext.Value) string {
	if len(v) == 0 {
		return ""
	}
	if !bytes.ContainsAny(v, " \t\r\n") {
		return string(v)
	}
	c := v.Clone()
	if err := c.Compact(); err != nil {
		return string(v)
	}
	return string(c)
}
