package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

type chatMessage struct {
	Role         string            `json:"role"`
	Name         string            `json:"name"`
	Content      json.RawMessage   `json:"content"`
	ToolCalls    []json.RawMessage `json:"tool_calls"`
	FunctionCall json.RawMessage   `json:"function_call"`
	ToolCallID   string            `json:"tool_call_id"`
	Refusal      string            `json:"refusal"`
	// Audio refers to audio the upstream keeps from an earlier answer.
	Audio json.RawMessage `json:"audio"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// ImageURL is chat's {"url", "detail"} (or a bare URL string).
	ImageURL json.RawMessage `json:"image_url"`
	// Detail is the Responses API's input_image detail.
	Detail string `json:"detail"`
	// File is chat's {"file_data", "file_id", "filename"}; FileData,
	// FileID and FileURL are the Responses API's input_file.
	File *chatFile `json:"file"`
	// InputAudio is chat's {"data", "format"}.
	InputAudio *struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
	FileURL  string `json:"file_url"`
}

type chatFile struct {
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
}

// file bounds a file part: a PDF inline, as a data URL.
func (p *contentPart) file(m *Model, param string) (int64, error) {
	data, id := p.FileData, p.FileID
	if p.File != nil {
		data, id = p.File.FileData, p.File.FileID
	}
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

// detail is an image part's detail level: "low", "high" or "auto".
func (p *contentPart) detail() string {
	if p.Detail != "" {
		return p.Detail
	}
	return gjson.GetBytes(p.ImageURL, "detail").String()
}

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

// decodedMessages are the messages ParseRequest decoded, where raw — the
// field as it is forwarded — is the text they were decoded from: the same
// bytes, not equal ones.
func (r *Request) decodedMessages(raw []byte) ([]chatMessage, bool) {
	ok := len(raw) > 0 && len(raw) == len(r.msgsOf) && unsafe.SliceData(raw) == unsafe.StringData(r.msgsOf)
	return r.msgs, ok
}

func (r *Request) chatInput(m *Model) (int64, error) {
	raw, ok := r.fields.get("messages")
	if !ok {
		return 0, badRequest("messages", "is required")
	}
	msgs, ok := r.decodedMessages(raw)
	if !ok {
		msgs, ok = decodeMessages(raw)
	}
	if !ok {
		var err error
		if msgs, err = unmarshalJSON[[]chatMessage](raw); err != nil {
			return 0, badRequest("messages", "must be an array of message objects")
		}
	}
	if len(msgs) == 0 {
		return 0, badRequest("messages", "must not be empty")
	}
	counted := make([]tokenizer.ChatMessage, len(msgs))
	// One text a message, the common case, from one array: a message's
	// Texts has room for one there, and one with more grows its own.
	texts := make([]string, len(msgs))
	for i, msg := range msgs {
		// The field's name is made for an error only: two strings a
		// message at every request otherwise.
		param := func() string { return "messages[" + strconv.Itoa(i) + "]" }
		if msg.Role == "" {
			p := param()
			return 0, badRequest(p+".role", "%s.role is required", p)
		}
		if len(msg.Audio) > 0 && !isNull(msg.Audio) {
			p := param()
			return 0, badRequest(p+".audio", "%s.audio refers to audio the upstream keeps, which the gateway cannot count", p)
		}
		cm := tokenizer.ChatMessage{Role: msg.Role, Name: msg.Name, Texts: texts[i : i : i+1]}
		if err := addContent(&cm, m, msg.Content, func() string { return param() + ".content" }); err != nil {
			return 0, err
		}
		for _, tc := range msg.ToolCalls {
			cm.Extra = append(cm.Extra, string(compact(tc)))
		}
		if len(msg.FunctionCall) > 0 && !isNull(msg.FunctionCall) {
			cm.Extra = append(cm.Extra, string(compact(msg.FunctionCall)))
		}
		for _, s := range []string{msg.ToolCallID, msg.Refusal} {
			if s != "" {
				cm.Extra = append(cm.Extra, s)
			}
		}
		counted[i] = cm
		r.audio += cm.AudioTokens
	}
	var tools []string
	for _, key := range []string{"tools", "functions"} {
		raw, ok := r.fields.get(key)
		if !ok || isNull(raw) {
			continue
		}
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return 0, badRequest(key, "must be an array")
		}
		for _, t := range list {
			tools = append(tools, string(compact(t)))
		}
	}
	// A JSON schema response format is shown to the model too; its JSON
	// bounds the rendering from above.
	if raw, ok := r.fields.get("response_format"); ok && bytes.Contains(raw, []byte("json_schema")) {
		tools = append(tools, string(compact(raw)))
	}
	return m.Counter.Chat(counted, tools), nil
}

// unmarshalJSON is encoding/json's reading of raw, for the spellings our
// own decoders leave to it: apart, so that the common path does not put
// the variable Unmarshal is given on the heap.
func unmarshalJSON[T any](raw []byte) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// addContent counts a message's content: a string, null, or an array of
// parts. Only text and image parts have a bound the gateway can compute;
// other part types (audio, files) are refused rather than let through
// unpriced. paramOf names the content's field, for errors: it is made only
// when one needs it.
func addContent(cm *tokenizer.ChatMessage, m *Model, raw json.RawMessage, paramOf func() string) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	if raw[0] == '"' {
		s, ok := jsonStr(raw)
		if !ok {
			return badRequest(paramOf(), "must be a string or an array of parts")
		}
		cm.Texts = append(cm.Texts, s)
		return nil
	}
	parts, ok := decodeTextParts(raw)
	if !ok {
		var err error
		if parts, err = unmarshalJSON[[]contentPart](raw); err != nil {
			return badRequest(paramOf(), "must be a string or an array of parts")
		}
	}
	for i, p := range parts {
		switch p.Type {
		case "text", "input_text":
			cm.Texts = append(cm.Texts, p.Text)
		case "image_url", "input_image":
			n, err := m.image(p.detail(), fmt.Sprintf("%s[%d]", paramOf(), i))
			if err != nil {
				return err
			}
			cm.ImageTokens += n
		case "input_audio":
			param := fmt.Sprintf("%s[%d]", paramOf(), i)
			if p.InputAudio == nil {
				return badRequest(param+".input_audio", "is required")
			}
			n, err := m.audio(p.InputAudio.Format, p.InputAudio.Data, param)
			if err != nil {
				return err
			}
			cm.AudioTokens += n
		case "file", "input_file":
			n, err := p.file(m, fmt.Sprintf("%s[%d]", paramOf(), i))
			if err != nil {
				return err
			}
			cm.ImageTokens += n
		default:
			return badRequest(fmt.Sprintf("%s[%d].type", paramOf(), i), "content part type %q cannot be estimated by the gateway", p.Type)
		}
	}
	return nil
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// promptInput counts a prompt or embeddings input: a string, an array of
// strings, an array of token ids, or an array of such arrays.
// It also returns how many prompts (inputs) it holds: an array of strings or
// of token arrays is one per element, a string or one token array is one.
func (r *Request) promptInput(m *Model, key string) (tokens, prompts int64, err error) {
	raw, ok := r.fields.get(key)
	if !ok || isNull(raw) {
		return 0, 0, badRequest(key, "%s is required", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return m.Counter.Count(s), 1, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, 0, badRequest(key, "%s must be a string, an array of strings or an array of token arrays", key)
	}
	if len(list) == 0 {
		return 0, 0, badRequest(key, "%s must not be empty", key)
	}
	ids := 0
	for i, item := range list {
		if err := json.Unmarshal(item, &s); err == nil {
			tokens += m.Counter.Count(s)
			prompts++
			continue
		}
		var tok int64
		if err := json.Unmarshal(item, &tok); err == nil {
			tokens++ // one token id of a single tokenized prompt
			ids++
			continue
		}
		var toks []int64
		if err := json.Unmarshal(item, &toks); err != nil {
			return 0, 0, badRequest(fmt.Sprintf("%s[%d]", key, i), "%s[%d] must be a string, a token id or an array of token ids", key, i)
		}
		tokens += int64(len(toks))
		prompts++
	}
	if ids > 0 {
		prompts++ // the token ids among the elements are one prompt
	}
	return tokens, prompts, nil
}
