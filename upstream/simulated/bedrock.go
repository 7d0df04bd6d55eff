package simulated

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// AWSCredentials are the credentials the simulated Bedrock checks SigV4
// signatures with, and its region.
type AWSCredentials struct {
	AccessKeyID, SecretAccessKey, Region string
}

type converseRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content []converseBlock `json:"content"`
	} `json:"messages"`
	System []struct {
		Text string `json:"text"`
	} `json:"system"`
	InferenceConfig struct {
		MaxTokens int64 `json:"maxTokens"`
	} `json:"inferenceConfig"`
	ToolConfig struct {
		Tools []struct {
			ToolSpec struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
		ToolChoice map[string]struct {
			Name string `json:"name"`
		} `json:"toolChoice"`
	} `json:"toolConfig"`
}

type converseBlock struct {
	Text     string    `json:"text"`
	Image    *struct{} `json:"image"`
	Document *struct {
		Format string `json:"format"`
		Source struct {
			Bytes string `json:"bytes"`
		} `json:"source"`
	} `json:"document"`
	ToolUse *struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"toolUse"`
	ToolResult *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"toolResult"`
}

// bedrockError answers as Bedrock does: the message in the body, the
// error's type in x-amzn-ErrorType.
func bedrockError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	writeJSON(w, status, map[string]any{"message": msg})
}

// bedrockAuthorized checks a request's SigV4 signature (re-signed with the
// server's credentials, its signed headers as sent) or its API key.
func (s *Server) bedrockAuthorized(r *http.Request, body []byte) bool {
	creds := s.opts.AWS
	if creds == nil {
		return true
	}
	auth := r.Header.Get("Authorization")
	if s.opts.APIKey != "" && auth == "Bearer "+s.opts.APIKey {
		return true
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return false
	}
	check, _ := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	check.Host = r.Host
	// As AWS does, re-sign what the client says it signed.
	_, signed, _ := strings.Cut(auth, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	for _, h := range strings.Split(signed, ";") {
		if v, ok := r.Header[http.CanonicalHeaderKey(h)]; ok && h != "host" {
			check.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey},
		check, hex.EncodeToString(sum[:]), "bedrock", creds.Region, at); err != nil {
		return false
	}
	return check.Header.Get("Authorization") == auth
}

// converse answers Bedrock's Converse and ConverseStream at
// /model/{model}/{op}.
func (s *Server) converse(w http.ResponseWriter, r *http.Request) {
	model, op := r.PathValue("model"), r.PathValue("op")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if !s.bedrockAuthorized(r, body) {
		bedrockError(w, http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return
	}
	var req converseRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		bedrockError(w, http.StatusBadRequest, "ValidationException", "messages is required")
		return
	}
	if op != "converse" && op != "converse-stream" {
		bedrockError(w, http.StatusNotFound, "UnknownOperationException", "unknown operation "+op)
		return
	}
	prompt := s.conversePrompt(model, &req)
	seed := seedOf(body)
	ans := s.answer(s.counter(model), seed, req.InferenceConfig.MaxTokens, req.ask())
	n := ans.tokens
	if strings.Contains(model, "claude") && ans.call != nil {
		n = min(int64(math.Ceil(float64(n)*ClaudeFactor)), req.InferenceConfig.MaxTokens)
	}
	s.bill(model, prompt, n)
	stop := map[string]string{"stop": "end_turn", "length": "max_tokens", "tool": "tool_use"}[ans.finish]
	usage := map[string]any{"inputTokens": prompt, "outputTokens": n, "totalTokens": prompt + n}
	if op == "converse" {
		content := []any{map[string]any{"text": ans.text}}
		if ans.call != nil {
			content = []any{map[string]any{"toolUse": map[string]any{"toolUseId": "tooluse_" + ans.call.id, "name": ans.call.name, "input": json.RawMessage(ans.call.args)}}}
		}
		s.record(model, prompt, n)
		s.delivered(model, n)
		writeJSON(w, http.StatusOK, map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
			"stopReason": stop, "usage": usage, "metrics": map[string]any{"latencyMs": 42}})
		return
	}
	send := eventFrames(w, r)
	send("messageStart", map[string]any{"role": "assistant"})
	if ans.call != nil {
		send("contentBlockStart", map[string]any{"contentBlockIndex": 0, "start": map[string]any{"toolUse": map[string]any{"toolUseId": "tooluse_" + ans.call.id, "name": ans.call.name}}})
		for _, p := range pieces(ans.call.args, 12) {
			send("contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"toolUse": map[string]any{"input": p}}})
		}
	} else {
		var sent int64
		if !s.streamWords(r, model, ans.text, n/2, &sent, func(piece string, _ bool) bool {
			return send("contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"text": " " + piece}})
		}) {
			return
		}
	}
	send("contentBlockStop", map[string]any{"contentBlockIndex": 0})
	send("messageStop", map[string]any{"stopReason": stop})
	if s.opts.Fault != DropUsage {
		s.record(model, prompt, n)
		send("metadata", map[string]any{"usage": usage, "metrics": map[string]any{"latencyMs": 42}})
	}
}

// eventFrames writes each event as an AWS event-stream frame, as
// converse-stream does, and reports whether the client is still there.
func eventFrames(w http.ResponseWriter, r *http.Request) func(event string, v any) bool {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	enc := eventstream.NewEncoder()
	flusher, _ := w.(http.Flusher)
	return func(event string, v any) bool {
		payload, _ := json.Marshal(v)
		msg := eventstream.Message{Payload: payload}
		msg.Headers.Set(":event-type", eventstream.StringValue(event))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		if enc.Encode(w, msg) != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return r.Context().Err() == nil
	}
}

// ask reads what a Converse request asks of its answer.
func (req *converseRequest) ask() ask {
	var a ask
	for _, t := range req.ToolConfig.Tools {
		a.tools = append(a.tools, tool{Name: t.ToolSpec.Name, Schema: t.ToolSpec.InputSchema.JSON})
	}
	for k, v := range req.ToolConfig.ToolChoice {
		a.mode, a.name = k, v.Name
	}
	if n := len(req.Messages); n > 0 {
		for _, b := range req.Messages[n-1].Content {
			a.result = a.result || b.ToolResult != nil
		}
	}
	return a
}

// conversePrompt is what Bedrock bills a request's input as; Claude's
// tokenizer is modelled as the Anthropic simulator's.
func (s *Server) conversePrompt(model string, req *converseRequest) int64 {
	c := s.counter(model)
	factor := 1.0
	if strings.Contains(model, "claude") {
		factor = ClaudeFactor
	}
	var n int64
	text := func(t string) { n += foreignTokens(c, t, factor) }
	for _, sys := range req.System {
		text(sys.Text)
	}
	for _, m := range req.Messages {
		n += 3
		for _, b := range m.Content {
			text(b.Text)
			switch {
			case b.Image != nil:
				n += 1600
			case b.Document != nil && b.Document.Format == "pdf":
				n += claudePDFPage * pdfPageCount(b.Document.Source.Bytes)
			case b.ToolUse != nil:
				text(b.ToolUse.Name + string(b.ToolUse.Input))
			case b.ToolResult != nil:
				for _, x := range b.ToolResult.Content {
					text(x.Text)
				}
			}
		}
	}
	if len(req.ToolConfig.Tools) > 0 {
		n += claudeToolPrompt
		for _, t := range req.ToolConfig.Tools {
			text(t.ToolSpec.Name + t.ToolSpec.Description + string(t.ToolSpec.InputSchema.JSON))
		}
	}
	return n
}
