package simulated

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// GeminiFactor is how the simulated Gemini models Gemini's tokenizer,
// which runs at Google: 1.1 tokens per BPE token of the same text but
// for its digits, a token each, and never more than its bytes
// (foreignTokens). A calibrated token_ratio must stay above it.
const GeminiFactor = 1.1

// geminiImageTokens is what Gemini bills an image of at most 384 pixels a
// side, or each 768-pixel tile of a larger one.
const geminiImageTokens = 258

type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []geminiPart `json:"parts"`
	} `json:"systemInstruction"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig struct {
		FunctionCallingConfig struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig struct {
		MaxOutputTokens    int64           `json:"maxOutputTokens"`
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

type geminiPart struct {
	Text         string                           `json:"text"`
	InlineData   *struct{ MimeType, Data string } `json:"inlineData"`
	FunctionCall *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

func geminiError(w http.ResponseWriter, status int, state, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": state}})
}

// gemini answers the Gemini API's generateContent and
// streamGenerateContent (?alt=sse) for /models/{model}:{method}; Vertex
// AI's publishers/google paths come here too.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	if method != "generateContent" && method != "streamGenerateContent" {
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "unknown method "+method)
		return
	}
	if method == "streamGenerateContent" && r.URL.Query().Get("alt") != "sse" {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "the simulated server streams server-sent events only (alt=sse)")
		return
	}
	body, err := io.ReadAll(r.Body)
	var req geminiRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || len(req.Contents) == 0 {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "contents is required")
		return
	}
	prompt := s.geminiPrompt(model, &req)
	seed := seedOf(body)
	limit := req.GenerationConfig.MaxOutputTokens
	ans := s.answer(s.counter(model), seed, limit, req.ask())
	// Thinking models think before they answer, billed as output and
	// within maxOutputTokens.
	thoughts := int64(0)
	if strings.Contains(model, "2.5") {
		thoughts = min(20, max(0, limit-ans.tokens))
	}
	s.bill(model, prompt, ans.tokens+thoughts)
	g := geminiReply{model: model, prompt: prompt, thoughts: thoughts, seed: seed}
	finish := map[string]string{"stop": "STOP", "length": "MAX_TOKENS", "tool": "STOP"}[ans.finish]
	parts := []any{map[string]any{"text": ans.text}}
	if ans.call != nil {
		parts = []any{map[string]any{"functionCall": map[string]any{"name": ans.call.name, "args": json.RawMessage(ans.call.args)}}}
	}
	if method == "generateContent" {
		s.record(model, prompt, ans.tokens+thoughts)
		s.delivered(model, ans.tokens)
		writeJSON(w, http.StatusOK, g.chunk(parts, finish, ans.tokens))
		return
	}
	send := s.eventWriter(w, r)
	if ans.call != nil {
		s.delivered(model, ans.tokens)
		s.record(model, prompt, ans.tokens+thoughts)
		send("", g.chunk(parts, finish, ans.tokens))
		return
	}
	s.geminiStream(r, send, g, ans, finish)
}

// geminiReply is what each chunk of a Gemini answer repeats.
type geminiReply struct {
	model            string
	prompt, thoughts int64
	seed             uint64
}

func (g geminiReply) chunk(parts []any, finish string, out int64) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	u := map[string]any{"promptTokenCount": g.prompt, "candidatesTokenCount": out, "totalTokenCount": g.prompt + out + g.thoughts}
	if g.thoughts > 0 {
		u["thoughtsTokenCount"] = g.thoughts
	}
	return map[string]any{"candidates": []any{cand}, "usageMetadata": u, "modelVersion": g.model, "responseId": fmt.Sprintf("sim%016x", g.seed)}
}

// geminiStream sends a text answer two words a chunk, each chunk with
// the usage so far, as streamGenerateContent does.
func (s *Server) geminiStream(r *http.Request, send func(string, any) bool, g geminiReply, ans answer, finish string) {
	var sent, counted int64
	s.streamWords(r, g.model, ans.text, ans.tokens/2, &sent, func(piece string, last bool) bool {
		counted += int64(len(strings.Fields(piece)))
		f := ""
		if last {
			f = finish
			if s.opts.Fault != DropUsage {
				s.record(g.model, g.prompt, ans.tokens+g.thoughts)
			}
		}
		c := g.chunk([]any{map[string]any{"text": " " + piece}}, f, counted)
		if last && s.opts.Fault == DropUsage {
			delete(c, "usageMetadata")
		}
		return send("", c)
	})
}

// ask reads what a generateContent request asks of its answer.
func (req *geminiRequest) ask() ask {
	var a ask
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			schema := f.ParametersJSONSchema
			if schema == nil {
				schema = f.Parameters
			}
			a.tools = append(a.tools, tool{Name: f.Name, Schema: schema})
		}
	}
	cfg := req.ToolConfig.FunctionCallingConfig
	a.mode = map[string]string{"AUTO": "auto", "ANY": "any", "NONE": "none"}[cfg.Mode]
	if cfg.Mode == "ANY" && len(cfg.AllowedFunctionNames) == 1 {
		a.mode, a.name = "tool", cfg.AllowedFunctionNames[0]
	}
	if n := len(req.Contents); n > 0 {
		for _, p := range req.Contents[n-1].Parts {
			a.result = a.result || p.FunctionResponse != nil
		}
	}
	if req.GenerationConfig.ResponseMimeType == "application/json" {
		a.json = true
		a.schema = req.GenerationConfig.ResponseJSONSchema
		if a.schema == nil {
			a.schema = req.GenerationConfig.ResponseSchema
		}
	}
	return a
}

// geminiPrompt is what Gemini bills a request's input as: its text, tool
// calls, results and declarations counted by geminiTokens, 3 a content,
// and each image.
func (s *Server) geminiPrompt(model string, req *geminiRequest) int64 {
	c := s.counter(model)
	var n, images int64
	text := func(t string) { n += geminiTokens(c, t) }
	count := func(parts []geminiPart) {
		for _, p := range parts {
			text(p.Text)
			switch {
			case p.InlineData != nil && p.InlineData.MimeType == "application/pdf":
				images += geminiPDFPage * pdfPageCount(p.InlineData.Data)
			case p.InlineData != nil:
				images += geminiImageTokens
			}
			if p.FunctionCall != nil {
				text(p.FunctionCall.Name + string(p.FunctionCall.Args))
			}
			if p.FunctionResponse != nil {
				text(p.FunctionResponse.Name + string(p.FunctionResponse.Response))
			}
		}
	}
	if req.SystemInstruction != nil {
		count(req.SystemInstruction.Parts)
	}
	for _, m := range req.Contents {
		n += 3
		count(m.Parts)
	}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			text(f.Name + f.Description + string(f.ParametersJSONSchema) + string(f.Parameters))
		}
	}
	return n + images
}

// geminiTokens is how the simulated Gemini counts a text: Gemini's
// tokenizer makes every digit a token, so the digits are counted one by
// one and the rest as BPE × GeminiFactor; no more than its bytes.
func geminiTokens(c *tokenizer.Counter, t string) int64 {
	var digits int64
	rest := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			digits++
			return -1
		}
		return r
	}, t)
	return min(foreignTokens(c, rest, GeminiFactor)+digits, int64(len(t)))
}
