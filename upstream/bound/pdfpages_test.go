package bound

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-pdf/fpdf"
	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

func init() { model.ConfigPath = "disable" } // pdfcpu writes no config directory

// pdfOf is an n-page PDF written by fpdf; with objectStreams, rewritten
// by pdfcpu with its objects (the page tree included) in compressed object
// streams, as most PDFs since 1.5 are.
func pdfOf(t testing.TB, n int, objectStreams bool) []byte {
	t.Helper()
	doc := fpdf.New("P", "mm", "A4", "")
	doc.SetFont("Helvetica", "", 12)
	for i := range n {
		doc.AddPage()
		doc.Cell(40, 10, fmt.Sprintf("Page %d of %d: quarterly figures.", i+1, n))
	}
	var b bytes.Buffer
	if err := doc.Output(&b); err != nil {
		t.Fatal(err)
	}
	if !objectStreams {
		return b.Bytes()
	}
	conf := model.NewDefaultConfiguration()
	conf.WriteObjectStream, conf.WriteXRefStream = true, true
	var out bytes.Buffer
	if err := api.Optimize(bytes.NewReader(b.Bytes()), &out, conf); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out.Bytes(), []byte("/Type /Pages")) || !bytes.Contains(out.Bytes(), []byte("/ObjStm")) {
		t.Fatal("pdfcpu left the page tree outside object streams")
	}
	return out.Bytes()
}

// The count is the page count pdfcpu reads, for PDFs with their page tree
// in the open and in object streams.
func TestPDFPages(t *testing.T) {
	for _, n := range []int{1, 3, 17, 120} {
		for _, objStm := range []bool{false, true} {
			pdf := pdfOf(t, n, objStm)
			want, err := api.PageCount(bytes.NewReader(pdf), model.NewDefaultConfiguration())
			if err != nil || want != n {
				t.Fatalf("pdfcpu counts %d pages (%v), want %d", want, err, n)
			}
			if got, err := pdfPages(pdf); err != nil || got != int64(n) {
				t.Errorf("%d pages (object streams %v): counted %d, %v", n, objStm, got, err)
			}
		}
	}
}

// A decoy page tree only raises the count; what hides the page tree from
// the scan — encryption, object streams under another filter, a bomb of a
// stream — leaves it unknown.
func TestPDFPagesDecoysAndUnknowns(t *testing.T) {
	real := pdfOf(t, 40, true)
	decoy := append(bytes.Clone(real), []byte("\n99 0 obj << /Type /Pages /Count 1 /Kids [] >> endobj\n")...)
	if got, err := pdfPages(decoy); err != nil || got != 40 {
		t.Errorf("with a decoy /Count 1: %d, %v", got, err)
	}
	raised := append(bytes.Clone(real), []byte("\n99 0 obj << /Type /Pages /Count 500 /Kids [] >> endobj\n")...)
	if got, _ := pdfPages(raised); got != 500 {
		t.Errorf("a larger decoy /Count raises the bound: %d", got)
	}
	for _, tc := range []struct {
		desc string
		pdf  []byte
		want string
	}{
		{"not a PDF", []byte("hello"), "not a PDF"},
		{"no page tree", []byte("%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n%%EOF"), "cannot be known"},
		{"encrypted", append(pdfOf(t, 2, false), []byte("trailer << /Encrypt 9 0 R >>")...), "encrypted"},
		{"LZW object stream", []byte("%PDF-1.7\n5 0 obj << /Type /ObjStm /N 1 /First 4 /Filter /LZWDecode /Length 3 >>stream\nabc\nendstream endobj\n2 0 obj << /Type /Pages /Count 1 >> endobj"), "other than by Flate"},
		{"a bomb", append([]byte("%PDF-1.7\n1 0 obj << /Length 99 /Filter /FlateDecode >>stream\n"), bomb(t)...), "64 MiB"},
	} {
		if _, err := pdfPages(tc.pdf); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.desc, err, tc.want)
		}
	}
}

// bomb is a zlib stream of 65 MiB of zeros.
func bomb(t testing.TB) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	zeros := make([]byte, 1<<20)
	for range 65 {
		_, _ = w.Write(zeros)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// FuzzPDFPages: no bytes panic the count, and a count is never zero.
func FuzzPDFPages(f *testing.F) {
	f.Add(pdfOf(f, 2, false))
	f.Add(pdfOf(f, 3, true))
	f.Add([]byte("%PDF-1.4\n<< /Type /Pages /Count 7 >> << /Type /Page >>"))
	f.Fuzz(func(t *testing.T, pdf []byte) {
		if n, err := pdfPages(pdf); err == nil && n <= 0 {
			t.Fatalf("counted %d pages without an error", n)
		}
	})
}

// A PDF inline is reserved as its pages times the model's page figure,
// in each format a client may send it; one the gateway cannot count is
// refused, naming the part.
func TestPDFDocumentsAreBoundedByTheirPages(t *testing.T) {
	counter, err := tokenizer.Load("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Name: "m", Counter: counter, MaxOutputTokens: 4096, DefaultOutputTokens: 512, ImageTokens: 1600, PDFPageTokens: 3100}
	b64 := base64.StdEncoding.EncodeToString(pdfOf(t, 7, true))
	for _, tc := range []struct {
		ep   Endpoint
		body string
	}{
		{Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","title":"Q3","source":{"type":"base64","media_type":"application/pdf","data":"` + b64 + `"}},{"type":"text","text":"Summarise."}]}]}`},
		{Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"q3.pdf","file_data":"data:application/pdf;base64,` + b64 + `"}},{"type":"text","text":"Summarise."}]}]}`},
		{Responses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"q3.pdf","file_data":"data:application/pdf;base64,` + b64 + `"}]}]}`},
	} {
		req, err := Parse(tc.ep, []byte(tc.body), nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := req.Prepare(m, serveAll{})
		if err != nil || p.InputTokens < 7*3100 || p.InputTokens > 7*3100+100 {
			t.Errorf("%s: %v, input bound %d, want 7 pages × 3,100 and a few tokens of text", tc.ep, err, p.InputTokens)
		}
	}
	for _, tc := range []struct {
		ep          Endpoint
		body, param string
	}{
		{Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x.test/a.pdf"}}]}]}`, "messages[0].content[0].source"},
		{Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + base64.StdEncoding.EncodeToString([]byte("%PDF-1.7 nothing")) + `"}}]}]}`, "messages[0].content[0]"},
		{Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"!!"}}]}]}`, "messages[0].content[0]"},
		{Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages[0].content[0]"},
	} {
		req, err := Parse(tc.ep, []byte(tc.body), nil)
		if err == nil {
			_, err = req.Prepare(m, serveAll{})
		}
		var re *RequestError
		if !errors.As(err, &re) || re.Param != tc.param {
			t.Errorf("%s: err = %v, want a refusal naming %s", tc.body[:80], err, tc.param)
		}
	}
	noPDF := *m
	noPDF.PDFPageTokens = 0
	req, _ := Parse(Messages, []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"`+b64+`"}}]}]}`), nil)
	if _, err := req.Prepare(&noPDF, serveAll{}); err == nil || !strings.Contains(err.Error(), "pdf_page_tokens") {
		t.Errorf("a model without a page figure: %v", err)
	}
}
