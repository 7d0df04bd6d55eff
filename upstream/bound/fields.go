package bound

import "slices"

// A union type — a content block, a part, an input item — has the fields of
// all its kinds; each kind reads only its own. A field of another kind
// that a value carries is refused: the bound does not count it, and a
// lenient server might read it.

// field is one field of a union value, and whether the value has it.
type field struct {
	name string
	set  bool
}

// onlyFields refuses a value of kind typ, named at, that has a field of
// fields other than those of allowed.
func onlyFields(at, typ string, fields []field, allowed ...string) error {
	for _, f := range fields {
		if f.set && !slices.Contains(allowed, f.name) {
			return badRequest(at+"."+f.name, "is not a field of %q", typ)
		}
	}
	return nil
}

// fields lists a block's fields, set or not.
func (blk *block) fields() []field {
	return []field{
		{"cache_control", blk.CacheControl != nil}, {"citations", len(blk.Citations) > 0}, {"text", blk.Text != nil},
		{"source", blk.Source != nil}, {"title", blk.Title != nil}, {"context", blk.Context != nil},
		{"id", blk.ID != ""}, {"name", blk.Name != ""}, {"input", len(blk.Input) > 0}, {"tool_name", blk.ToolName != ""},
		{"tool_use_id", blk.ToolUseID != ""}, {"content", blk.Content.set}, {"is_error", len(blk.IsError) > 0},
		{"thinking", blk.Thinking != nil}, {"signature", blk.Signature != ""}, {"data", blk.Data != nil},
	}
}

// blockFields are the fields of each kind of content block.
var blockFields = map[string][]string{
	"text":              {"text", "cache_control", "citations"},
	"image":             {"source", "cache_control"},
	"document":          {"source", "title", "context", "citations", "cache_control"},
	"search_result":     {"source", "title", "content", "citations", "cache_control"},
	"tool_use":          {"id", "name", "input", "cache_control"},
	"tool_result":       {"tool_use_id", "content", "is_error", "cache_control"},
	"thinking":          {"thinking", "signature"},
	"redacted_thinking": {"data"},
	"tool_reference":    {"tool_name", "cache_control"},
}

// check refuses a source whose fields are not its kind's: a document's
// text with a PDF's media type, a PDF's data with a URL beside it.
func (s *source) check(at string) error {
	fields := []field{{"media_type", s.MediaType != ""}, {"data", s.Data != ""}, {"url", s.URL != ""},
		{"file_id", s.FileID != ""}, {"content", s.Content.set}}
	allowed := map[string][]string{
		"base64": {"media_type", "data"}, "text": {"media_type", "data"}, "url": {"url"}, "file": {"file_id"}, "content": {"content"},
	}[s.Type]
	if allowed == nil {
		return badRequest(at+".type", "source type %q is not one the gateway can bound", s.Type)
	}
	if s.Type == "text" && s.MediaType != "" && s.MediaType != "text/plain" {
		return badRequest(at+".media_type", "a text source is text/plain, not %q", s.MediaType)
	}
	return onlyFields(at, s.Type, fields, allowed...)
}

// fields lists an input item's fields, set or not.
func (it *responsesItem) fields() []field {
	return []field{
		{"role", it.Role != ""}, {"content", it.Content.set}, {"call_id", it.CallID != ""}, {"name", it.Name != ""},
		{"arguments", it.Arguments != nil}, {"input", it.Input != nil}, {"output", it.Output.set},
		{"summary", it.Summary != nil}, {"encrypted_content", it.EncryptedContent != nil}, {"tools", it.Tools != nil},
	}
}

// itemFields are the fields (besides type, id and status) of each kind of
// input item.
var itemFields = map[string][]string{
	"message":                 {"role", "content"},
	"function_call":           {"call_id", "name", "arguments"},
	"custom_tool_call":        {"call_id", "name", "input"},
	"function_call_output":    {"call_id", "output"},
	"custom_tool_call_output": {"call_id", "output"},
	"reasoning":               {"summary", "encrypted_content", "content"},
	"additional_tools":        {"role", "tools"},
}

// fields lists a Responses content part's fields, set or not.
func (p *responsesPart) fields() []field {
	return []field{
		{"text", p.Text != nil}, {"annotations", len(p.Annotations) > 0}, {"logprobs", len(p.Logprobs) > 0},
		{"image_url", p.ImageURL != nil}, {"detail", p.Detail != ""}, {"file_id", p.FileID != nil}, {"file_data", p.FileData != nil},
		{"file_url", p.FileURL != nil}, {"filename", p.Filename != nil}, {"refusal", p.Refusal != nil},
	}
}

// partFields are the fields of each kind of Responses content part.
var partFields = map[string][]string{
	"input_text":     {"text"},
	"output_text":    {"text", "annotations", "logprobs"},
	"summary_text":   {"text"},
	"reasoning_text": {"text"},
	"refusal":        {"refusal"},
	"input_image":    {"image_url", "file_id", "detail"},
	"input_file":     {"file_data", "file_id", "file_url", "filename"},
}
