package bound

import (
	"slices"
	"strings"
)

// Anthropic's betas are switched on per request by the anthropic-beta
// header; some change what a request may bill. Each beta value the
// gateway forwards is one it knows: "" where the bound covers what it
// enables, else why it is refused. docs/bounds.md lists them
// (TestBoundsDocListsEveryBeta). An operator lets another through with
// upstreams[].pass_betas.
var betas = map[string]string{
	// Free: they change the wire, not the price.
	"prompt-caching-2024-07-31":                 "", // cache writes bill at the model's cache_write price
	"pdfs-2024-09-25":                           "", // PDFs are bounded by their pages
	"token-counting-2024-11-01":                 "",
	"message-batches-2024-09-24":                "",
	"token-efficient-tools-2025-02-19":          "",
	"output-128k-2025-02-19":                    "", // max_tokens stays within the model's max_output_tokens
	"interleaved-thinking-2025-05-14":           "", // thinking is output, within max_tokens
	"fine-grained-tool-streaming-2025-05-14":    "",
	"context-management-2025-06-27":             "", // clears old context: less input, never more
	"search-results-2025-06-09":                 "", // search_result blocks are counted as text
	"computer-use-2024-10-22":                   "", // client tools: counted, with their expansion
	"computer-use-2025-01-24":                   "",
	"claude-code-20250219":                      "",
	"model-context-window-exceeded-2025-08-26":  "",
	"effort-2025-11-24":                         "", // output_config.effort: thinking within max_tokens
	"structured-outputs-2025-11-13":             "", // output_format's schema is counted as input
	"advanced-tool-use-2025-11-20":              "", // deferred tools are counted; the tool search tool is refused as a server tool
	"thinking-token-count-2026-05-13":           "", // reports thinking tokens
	"prompt-caching-scope-2026-01-05":           "",
	"mid-conversation-system-2026-04-07":        "", // system messages are counted as the others
	"dev-full-thinking-2025-05-14":              "",
	"computer-use-2025-11-24":                   "",
	"output-300k-2026-03-24":                    "",
	"task-budgets-2026-03-13":                   "",
	"thinking-display-updates-2026-08-18":       "",
	"thinking-binding-controls-2026-08-01":      "",
	"cache-diagnosis-2026-04-07":                "",
	"mid-conversation-output-config-2026-07-01": "",
	// Long context: the bound prices a request past 200k input tokens at
	// the model's long-context tier (models.<m>.above), and refuses it on
	// a model that has none (Prepared.Cost).
	"context-1m-2025-08-07": "",
	// One-hour cache writes: priced at the model's cache_write_1h
	// (Prepared.Cost refuses them on a model without one).
	"extended-cache-ttl-2025-04-11": "",

	// Refused: they bill what the bound cannot compute.
	"fast-mode-2026-02-01":      "fast mode bills a multiple of the price (models.<name>.fast_mode), and the model has none",
	"advisor-tool-2026-03-01":   "the advisor tool bills a second model's tokens",
	"compact-2026-01-12":        "compaction bills an extra sampling step the gateway cannot bound",
	"compact-2026-09-04":        "compaction bills an extra sampling step the gateway cannot bound",
	"mcp-client-2025-11-20":     "MCP servers run tools at the provider, whose results the gateway cannot bound",
	"mcp-client-2025-04-04":     "MCP servers run tools at the provider, whose results the gateway cannot bound",
	"code-execution-2025-05-22": "code execution bills by the hour at the provider",
	"code-execution-2025-08-25": "code execution bills by the hour at the provider",
	"files-api-2025-04-14":      "a file by id has a size the gateway cannot know",
	"web-fetch-2025-09-10":      "fetched pages bill as input the gateway cannot count",
	"skills-2025-10-02":         "skills run in a container that bills by the hour",
}

// anthropicVersions are the anthropic-version values the gateway knows
// (the header is forwarded as the client sent it, 2023-06-01 where it sent
// none).
var anthropicVersions = []string{"2023-01-01", "2023-06-01", "2026-10-21"}

// betas is the anthropic-beta header to forward for the client's values:
// each one known and free, or let pass by m's upstream; a *RequestError
// names the first that is neither.
func (m *Model) betas(values []string) (string, error) {
	for _, b := range values {
		if m.Pass != nil && slices.Contains(m.Pass.Betas, b) {
			continue
		}
		reason, known := betas[b]
		switch {
		case !known:
			return "", badRequest("anthropic-beta", "the beta %q is not one the gateway knows: it forwards only betas whose cost it can bound (docs/bounds.md). "+
				"If it bills nothing, the upstream's operator can let it pass with upstreams[].pass_betas: [%s], taking the bill's risk", b, b)
		case b == fastModeBeta && m.FastMode > 0:
			// priced: the request's speed bills at the model's multiple
		case reason != "":
			return "", badRequest("anthropic-beta", "the beta %q is refused: %s, which the gateway cannot bound. "+
				"An upstream's operator who prices it outside the gateway can let it pass with upstreams[].pass_betas: [%s], taking the bill's risk", b, reason, b)
		}
	}
	return strings.Join(values, ","), nil
}
