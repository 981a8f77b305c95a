package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// onePagePDF is a minimal PDF whose one page shows lines with the content operators
// given, compressed with FlateDecode when flate is set.
func onePagePDF(content string, flate bool) []byte {
	stream, filter := []byte(content), ""
	if flate {
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		w.Write(stream)
		w.Close()
		stream, filter = b.Bytes(), " /Filter /FlateDecode"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n")
	fmt.Fprintf(&b, "3 0 obj\n<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>\nendobj\n")
	fmt.Fprintf(&b, "4 0 obj\n<< /Length %d%s >>\nstream\n", len(stream), filter)
	b.Write(stream)
	fmt.Fprintf(&b, "\nendstream\nendobj\n5 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%%%EOF")
	return b.Bytes()
}

func TestPDFText(t *testing.T) {
	for _, c := range []struct {
		name, content string
		flate         bool
		want          string
		ok            bool
	}{
		{"Tj", "BT /F1 12 Tf 72 72 Td (Title: A Fixture) Tj ET", false, "Title: A Fixture", true},
		{"flate, two lines", "BT /F1 12 Tf 72 720 Td (First line) Tj 0 -14 Td (Second \\(line\\)) Tj ET", true, "First line\nSecond (line)", true},
		{"TJ kerning", "BT [(Hel) 20 (lo) -250 (world)] TJ ET", false, "Hello world", true},
		{"octal and UTF-16", "BT (caf\\351) Tj T* <FEFF00E9007400E9> Tj ET", false, "café\nété", true},
		{"no text", "0 0 m 10 10 l S", false, "", false},
		{"glyph codes", "BT <0001000200030004> Tj ET", false, "", false},
		{"a stray ) and a name between operand and operator", "BT (kept) ) /Name Tj ET", false, "kept", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := pdfText(onePagePDF(c.content, c.flate))
			if ok != c.ok || (ok && got != c.want) {
				t.Errorf("pdfText = %q, %v; want %q, %v", got, ok, c.want, c.ok)
			}
		})
	}
	if _, ok := pdfText([]byte("%PDF-1.7\x00\x01binary")); ok {
		t.Error("a PDF without pages reads as text")
	}
	if _, ok := pdfText([]byte("not a pdf")); ok {
		t.Error("not a PDF reads as text")
	}
}

// A PDF given as input_file reaches a model without files as its text; one without
// text to read is a 400 naming the model and the file.
func TestFileTextPDF(t *testing.T) {
	pdf := base64.StdEncoding.EncodeToString(onePagePDF("BT (Title: OpenResponses File Input Fixture) Tj ET", true))
	f, err := DecodeFile("input[0].content[1]", "fixture.pdf", "data:application/pdf;base64,"+pdf, "", "")
	if err != nil || f.Kind != PartFile || f.File.MediaType != "application/pdf" {
		t.Fatalf("%+v %v", f, err)
	}
	p, err := fileText(f.File, "m1")
	if err != nil || p.Kind != PartText || !strings.Contains(p.Text, "Title: OpenResponses File Input Fixture") || !strings.Contains(p.Text, `name="fixture.pdf"`) {
		t.Fatalf("%+v %v", p, err)
	}
	blank := base64.StdEncoding.EncodeToString(onePagePDF("0 0 m 1 1 l S", false))
	f, err = DecodeFile("input[0].content[0]", "scan.pdf", blank, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = fileText(f.File, "m1")
	if e := AsError(err); e == nil || e.Status != 400 || !strings.Contains(e.Message, `"m1"`) || !strings.Contains(e.Message, "scan.pdf") {
		t.Fatalf("%v", err)
	}
}

// FuzzPDFText feeds pdfText arbitrary bytes: it reads files clients upload, so it must
// never panic, and never return more than its bound.
func FuzzPDFText(f *testing.F) {
	f.Add(onePagePDF("BT /F1 12 Tf (Hello) Tj ET", false))
	f.Add(onePagePDF("BT [(Hel) -20 (lo)] TJ T* (<feff0041>) ' ET", true))
	f.Add([]byte("%PDF-1.4\n1 0 obj << /Length 5 >> stream\n(a\\\nendstream"))
	f.Fuzz(func(t *testing.T, b []byte) {
		text, ok := pdfText(b)
		if len(text) > pdfMaxText {
			t.Fatalf("pdfText returned %d bytes, over its bound", len(text))
		}
		if ok && text == "" {
			t.Fatal("pdfText reported readable text but returned none")
		}
	})
}

// TestPDFTextBoundsInflation: a file of many small compression bombs inflates no more
// than the budget in all, not a budget per stream.
func TestPDFTextBoundsInflation(t *testing.T) {
	var bomb bytes.Buffer
	w := zlib.NewWriter(&bomb)
	w.Write(bytes.Repeat([]byte{' '}, 8<<20)) // 8 MiB of spaces: no text, all work
	w.Close()
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	for i := range 64 {
		fmt.Fprintf(&b, "%d 0 obj\n<< /Length %d /Filter /FlateDecode >>\nstream\n", i+1, bomb.Len())
		b.Write(bomb.Bytes())
		b.WriteString("\nendstream\nendobj\n")
	}
	calls := 0
	pdfInflated = func(n int) { calls += n }
	defer func() { pdfInflated = func(int) {} }()
	if _, ok := pdfText(b.Bytes()); ok {
		t.Fatal("a file of spaces has no readable text")
	}
	if calls > 4*pdfMaxText {
		t.Fatalf("inflated %d bytes from %d bytes of file; the budget is %d", calls, b.Len(), 4*pdfMaxText)
	}
}
