package bound

import (
	"bytes"
	"compress/zlib"
	"errors"
	"io"
	"regexp"
	"strconv"
)

// maxInflated bounds what counting one PDF's pages may inflate: a PDF
// whose compressed streams expand past it is refused rather than read.
const maxInflated = 64 << 20

var (
	pdfPagesCount = regexp.MustCompile(`/Type\s*/Pages\b[^>]*?/Count\s+(\d+)(\s+\d+\s+R)?|/Count\s+(\d+)(\s+\d+\s+R)?[^<>]*?/Type\s*/Pages\b`)
	pdfPageLeaf   = regexp.MustCompile(`/Type\s*/Page\b`)
	pdfStream     = regexp.MustCompile(`stream\r?\n`)
	pdfObjStm     = regexp.MustCompile(`/Type\s*/ObjStm\b`)
	// pdfFlateOnly is a stream dictionary whose one filter is Flate,
	// without a predictor.
	pdfFlateOnly = regexp.MustCompile(`^[^\[]*/Filter\s*(/FlateDecode|\[\s*/FlateDecode\s*\])[^\[]*$`)
)

var errPDFPages = errors.New("the page count of the PDF cannot be known")

// pdfPages is an upper bound on the pages of a PDF: the largest /Count
// of a page-tree node, or the number of page objects if that is more,
// found in the file's bytes and in every stream that inflates (object
// streams hold the page tree of most PDFs since 1.5). Each figure only
// ever raises the bound: a decoy can add pages, never hide them. A PDF
// that is encrypted, has no page tree the scan can see, or inflates past
// maxInflated has no count.
func pdfPages(data []byte) (int64, error) {
	if !bytes.HasPrefix(data, []byte("%PDF-")) {
		return 0, errors.New("not a PDF (no %PDF- header)")
	}
	if bytes.Contains(data, []byte("/Encrypt")) {
		return 0, errors.New("the PDF is encrypted: its page count cannot be known")
	}
	var s pageScan
	s.scan(data)
	budget := int64(maxInflated)
	for _, loc := range pdfStream.FindAllIndex(data, -1) {
		if d := streamDict(data, loc[0]); pdfObjStm.Match(d) && (!pdfFlateOnly.Match(d) || bytes.Contains(d, []byte("/Predictor"))) {
			// Objects the scan cannot read could hold the page tree.
			return 0, errors.New("the PDF's object streams are encoded other than by Flate alone: its page count cannot be known")
		}
		zr, err := zlib.NewReader(bytes.NewReader(data[loc[1]:]))
		if err != nil {
			continue // not a Flate stream: an image, a font, plain text
		}
		out, err := io.ReadAll(io.LimitReader(zr, budget+1))
		budget -= int64(len(out))
		if budget < 0 {
			return 0, errors.New("the PDF's streams inflate past 64 MiB: its page count is not read")
		}
		if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
			s.scan(out)
		}
	}
	if s.pages == 0 {
		return 0, errPDFPages
	}
	return s.pages, nil
}

type pageScan struct{ pages, leaves int64 }

func (s *pageScan) scan(b []byte) {
	for _, m := range pdfPagesCount.FindAllSubmatch(b, -1) {
		n := m[1]
		if n == nil {
			n = m[3]
		}
		if len(m[2]) > 0 || len(m[4]) > 0 {
			continue // an indirect /Count: the leaves count instead
		}
		if c, err := strconv.ParseInt(string(n), 10, 64); err == nil && c > s.pages && c < 1<<31 {
			s.pages = c
		}
	}
	s.leaves += int64(len(pdfPageLeaf.FindAllIndex(b, -1)))
	s.pages = max(s.pages, s.leaves)
}

// streamDict is the dictionary just before the stream keyword at i (at
// most 4 KiB of it), or nil.
func streamDict(data []byte, i int) []byte {
	j := i
	for j > 0 && isPDFSpace(data[j-1]) {
		j--
	}
	if j < 2 || data[j-1] != '>' || data[j-2] != '>' {
		return nil
	}
	depth := 0
	for k := j - 1; k > 0 && j-k < 4096; k-- {
		switch {
		case data[k] == '>' && data[k-1] == '>':
			depth++
			k--
		case data[k] == '<' && data[k-1] == '<':
			depth--
			k--
			if depth == 0 {
				return data[k:j]
			}
		}
	}
	return nil
}

func isPDFSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}
