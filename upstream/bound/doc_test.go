package bound

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// docFile is the document that lists every field and beta the gateway
// knows; the part between its markers is written from the code.
const docFile = "../../docs/bounds.md"

// fieldTable is the table of every top-level field of every endpoint, as
// the request types tag them.
func fieldTable() string {
	var b strings.Builder
	b.WriteString("| endpoint | field | class |\n|---|---|---|\n")
	for _, ep := range []struct {
		name string
		typ  reflect.Type
	}{
		{"chat", reflect.TypeFor[chatRequest]()},
		{"completions", reflect.TypeFor[completionRequest]()},
		{"embeddings", reflect.TypeFor[embeddingRequest]()},
		{"messages", reflect.TypeFor[messagesRequest]()},
		{"responses", reflect.TypeFor[responsesRequest]()},
	} {
		var rows []string
		for i := range ep.typ.NumField() {
			f := ep.typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | `%s` | %s |\n", ep.name, name, f.Tag.Get("bound")))
		}
		slices.Sort(rows)
		for _, r := range rows {
			b.WriteString(r)
		}
	}
	return b.String()
}

// betaTable is the table of every anthropic-beta value the gateway knows.
func betaTable() string {
	var b strings.Builder
	b.WriteString("| `anthropic-beta` | forwarded |\n|---|---|\n")
	var names []string
	for name := range betas {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		what := "yes"
		if r := betas[name]; r != "" {
			what = "refused: " + r
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, what)
	}
	return b.String()
}

// TestBoundsDocListsEveryField: docs/bounds.md lists every field each
// endpoint's type knows, with its class, and every beta, as the code has
// them; -update writes the tables.
func TestBoundsDocListsEveryField(t *testing.T) {
	doc, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, part := range []struct{ name, table string }{{"fields", fieldTable()}, {"betas", betaTable()}} {
		begin, end := "<!-- "+part.name+": written by TestBoundsDocListsEveryField -->\n", "<!-- end of "+part.name+" -->"
		i, j := strings.Index(text, begin), strings.Index(text, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q … %q part", docFile, begin, end)
		}
		if got := text[i+len(begin) : j]; got != part.table {
			if !updating() {
				t.Errorf("%s's %s table is not the code's: go test ./upstream/bound -run TestBoundsDocListsEveryField -update", docFile, part.name)
				continue
			}
			text = text[:i+len(begin)] + part.table + text[j:]
		}
	}
	if updating() {
		if err := os.WriteFile(docFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[chatRequest](), reflect.TypeFor[completionRequest](), reflect.TypeFor[embeddingRequest](),
		reflect.TypeFor[messagesRequest](), reflect.TypeFor[responsesRequest]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if c := f.Tag.Get("bound"); f.Tag.Get("json") != "" && c != "bounded" && c != "free" && c != "refused" {
				t.Errorf("%s.%s is tagged bound:%q: bounded, free or refused", typ.Name(), f.Name, c)
			}
		}
	}
}
