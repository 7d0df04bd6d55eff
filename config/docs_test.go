package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate-dev/tollgate/config"
)

// docBase completes a snippet that is not a whole config: an upstream, a
// model, an org with a team.
const docBase = `
upstreams:
  - {name: openai, kind: openai, base_url: "https://api.openai.com/v1", api_key: k, models: [gpt-4o, gpt-5]}
  - {name: anthropic, kind: anthropic, base_url: "https://api.anthropic.com/v1", api_key: k, models: [claude-sonnet-4-5]}
orgs: [{id: acme, teams: [{id: ml}]}]
`

var yamlBlock = regexp.MustCompile("(?s)(<!-- not checked[^>]*-->\\s*)?```yaml\\n(.*?)```")

// Every YAML snippet in the README and docs/ is a valid config, or part
// of one: a whole config as it stands, top-level settings over a small
// base, a list of limits as a team's. A snippet that is only an
// illustration says so in a <!-- not checked: why --> comment before it.
func TestDocsConfigSnippets(t *testing.T) {
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md")
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllSubmatchIndex(raw, -1) {
			line := 1 + strings.Count(string(raw[:m[0]]), "\n")
			if m[2] >= 0 {
				continue
			}
			snippet := dedent(string(raw[m[4]:m[5]]))
			src, err := asConfig(snippet)
			if err != nil {
				t.Errorf("%s:%d: not YAML: %v", f, line, err)
				continue
			}
			if _, err := config.Parse(src, docEnv); err != nil {
				t.Errorf("%s:%d: %v\n%s", f, line, err, snippet)
			}
			checked++
		}
	}
	if checked < 6 {
		t.Fatalf("only %d snippets checked", checked)
	}
}

// dedent removes the indentation of a snippet inside a list item.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

// asConfig makes a snippet a whole config.
func asConfig(snippet string) ([]byte, error) {
	var node any
	if err := yaml.Unmarshal([]byte(snippet), &node); err != nil {
		return nil, err
	}
	var base map[string]any
	if err := yaml.Unmarshal([]byte(docBase), &base); err != nil {
		return nil, err
	}
	switch v := node.(type) {
	case []any: // limits
		base["orgs"] = []any{map[string]any{"id": "acme", "teams": []any{map[string]any{"id": "ml", "limits": v}}}}
	case map[string]any:
		if _, whole := v["upstreams"]; whole {
			base = map[string]any{}
		}
		for k, val := range v {
			base[k] = val
		}
	}
	return yaml.Marshal(base)
}

// docEnv gives the ${VARS} of the docs plausible values.
func docEnv(name string) (string, bool) {
	switch {
	case strings.Contains(name, "DSN"):
		return "postgres://tollgate@127.0.0.1:5432/tollgate", true
	case strings.Contains(name, "ADDR"):
		return "127.0.0.1:6379", true
	case strings.Contains(name, "URL"):
		return "https://hooks.example.com/x", true
	}
	return "value-of-" + name, true
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link in the README and docs/ reaches a file, and its
// #anchor a heading there.
func TestDocsLinks(t *testing.T) {
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := f
			if path != "" {
				file = filepath.Join(filepath.Dir(f), path)
			}
			body, err := os.ReadFile(file)
			if err != nil {
				if info, serr := os.Stat(file); serr == nil && info.IsDir() {
					continue
				}
				t.Errorf("%s: link %s: %v", f, target, err)
				continue
			}
			if anchor != "" && !hasAnchor(string(body), anchor) {
				t.Errorf("%s: link %s: no heading #%s in %s", f, target, anchor, file)
			}
		}
	}
}

// hasAnchor reports whether markdown md has a heading whose GitHub anchor
// is anchor.
func hasAnchor(md, anchor string) bool {
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
		if strings.ReplaceAll(h, " ", "-") == anchor {
			return true
		}
	}
	return false
}
