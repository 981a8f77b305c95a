package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/hex"
	"io"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// pdfMaxText bounds what pdfText inflates and returns: a file's text for a model, not
// a way to make the server inflate a compression bomb.
const pdfMaxText = 4 << 20

// pdfInflated observes how many bytes each inflated stream gave (tests count them).
var pdfInflated = func(int) {}

// isPDF reports whether a file is a PDF, by its media type, its name or its header.
func isPDF(media, filename string, content []byte) bool {
	return media == "application/pdf" || strings.EqualFold(path.Ext(filename), ".pdf") || bytes.HasPrefix(content, []byte("%PDF-"))
}

// pdfText is the text a PDF shows, for models that read files as text: the strings of
// the text operators (Tj, TJ, ', ") of its content streams, inflated when they are
// FlateDecode, one line per text line. It reads the simple fonts' byte strings and
// UTF-16 strings; it cannot read text drawn with embedded CID fonts, scanned pages or
// encrypted files, and reports ok false when it found no readable text.
func pdfText(pdf []byte) (text string, ok bool) {
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) || bytes.Contains(pdf, []byte("/Encrypt")) {
		return "", false
	}
	var out strings.Builder
	rest := pdf
	inflateBudget := int64(4 * pdfMaxText) // all streams together: many small bombs are one big one
	for out.Len() < pdfMaxText && inflateBudget > 0 {
		i := bytes.Index(rest, []byte("stream"))
		if i < 0 {
			break
		}
		dictStart := bytes.LastIndex(rest[:i], []byte("obj"))
		dict := rest[max(dictStart, 0):i]
		body := rest[i+len("stream"):]
		body = bytes.TrimPrefix(body, []byte("\r"))
		body = bytes.TrimPrefix(body, []byte("\n"))
		end := bytes.Index(body, []byte("endstream"))
		if end < 0 {
			break
		}
		data := body[:end]
		rest = body[end+len("endstream"):]
		if bytes.HasSuffix(dict, []byte("end")) { // the "endstream" of the previous object
			continue
		}
		if bytes.Contains(dict, []byte("/Subtype")) || bytes.Contains(dict, []byte("/Length1")) {
			continue // an image, a font or another embedded file: not page content
		}
		switch {
		case bytes.Contains(dict, []byte("/FlateDecode")):
			zr, err := zlib.NewReader(bytes.NewReader(data))
			if err != nil {
				continue
			}
			inflated, _ := io.ReadAll(io.LimitReader(zr, min(pdfMaxText, inflateBudget)))
			zr.Close()
			inflateBudget -= int64(len(inflated))
			pdfInflated(len(inflated))
			data = inflated
		case bytes.Contains(dict, []byte("/Filter")):
			continue // another encoding: not read
		}
		pdfContentText(data, &out)
	}
	text = strings.TrimSpace(out.String())
	if len(text) > pdfMaxText {
		text = text[:pdfMaxText]
	}
	return text, readable(text)
}

// readable reports whether extracted text reads as text: mostly letters, digits,
// spaces and punctuation (the byte codes of a font with its own encoding do not).
func readable(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	good, all := 0, 0
	for _, r := range s {
		all++
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsSymbol(r) {
			good++
		}
	}
	return good*10 >= all*9
}

// pdfContentText appends the text shown by one content stream's text objects to out.
func pdfContentText(data []byte, out *strings.Builder) {
	var operands [][]byte // the strings among the current operator's operands
	inText, line, inArray := false, false, false
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '%': // a comment, to the end of the line
			for i < len(data) && data[i] != '\n' && data[i] != '\r' {
				i++
			}
		case c == '(':
			s, n := pdfLiteral(data[i:])
			operands = append(operands, s)
			i += n
		case c == '<' && i+1 < len(data) && data[i+1] == '<':
			i += 2
		case c == '<':
			j := bytes.IndexByte(data[i:], '>')
			if j < 0 {
				return
			}
			h := bytes.Map(func(r rune) rune {
				if unicode.Is(unicode.ASCII_Hex_Digit, r) {
					return r
				}
				return -1
			}, data[i+1:i+j])
			if len(h)%2 == 1 {
				h = append(h, '0')
			}
			b := make([]byte, len(h)/2)
			hex.Decode(b, h)
			operands = append(operands, b)
			i += j + 1
		case c == '[' || c == ']':
			inArray = c == '['
			i++
		case c == '{' || c == '}' || c == '>' || c == ')' || isPDFSpace(c): // a stray ')' too
			i++
		default: // a name (skipped), a number or an operator
			j := i + 1
			for j < len(data) && !isPDFSpace(data[j]) && !bytes.ContainsRune([]byte("()<>[]{}/%"), rune(data[j])) {
				j++
			}
			tok := string(data[i:j])
			i = j
			if tok[0] == '/' {
				continue
			}
			if (tok[0] >= '0' && tok[0] <= '9') || tok[0] == '-' || tok[0] == '+' || tok[0] == '.' {
				// A number operand; in a TJ array a large negative one moves the pen a
				// word's space to the right.
				if v, err := strconv.ParseFloat(tok, 64); err == nil && inArray && v <= -200 {
					operands = append(operands, []byte(" "))
				}
				continue
			}
			switch tok {
			case "BT":
				inText = true
			case "ET":
				inText = false
				if line {
					out.WriteByte('\n')
					line = false
				}
			case "Td", "TD", "T*", "Tm", "'", "\"":
				if inText && line {
					out.WriteByte('\n')
					line = false
				}
			}
			if inText && (tok == "Tj" || tok == "TJ" || tok == "'" || tok == "\"") {
				for _, s := range operands {
					out.WriteString(pdfString(s))
					line = true
				}
			}
			operands = operands[:0]
		}
	}
}

func isPDFSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

// pdfEscapes are the characters of a literal string's one-letter escapes.
var pdfEscapes = map[byte]byte{'n': '\n', 'r': '\r', 't': '\t', 'b': '\b', 'f': '\f'}

// pdfLiteral reads a literal string "( … )" at the start of b: its bytes, escapes
// resolved, and how many bytes of b it took.
func pdfLiteral(b []byte) ([]byte, int) {
	var s []byte
	depth := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case '(':
			if depth > 0 {
				s = append(s, c)
			}
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s, i + 1
			}
			s = append(s, c)
		case '\\':
			i++
			if i >= len(b) {
				return s, i
			}
			switch e := b[i]; {
			case pdfEscapes[e] != 0:
				s = append(s, pdfEscapes[e])
			case e == '\r' || e == '\n': // a line continuation
				if e == '\r' && i+1 < len(b) && b[i+1] == '\n' {
					i++
				}
			case e >= '0' && e <= '7':
				v := 0
				for k := 0; k < 3 && i < len(b) && b[i] >= '0' && b[i] <= '7'; k++ {
					v = v*8 + int(b[i]-'0')
					i++
				}
				i--
				s = append(s, byte(v))
			default:
				s = append(s, e)
			}
		default:
			s = append(s, c)
		}
	}
	return s, len(b)
}

// pdfString decodes a PDF text string: UTF-16BE after its byte order mark, else one
// character a byte (PDFDocEncoding and the standard encodings agree on ASCII and
// mostly with Latin-1 above it).
func pdfString(b []byte) string {
	if len(b) >= 2 && b[0] == 0xFE && b[1] == 0xFF {
		u := make([]uint16, 0, len(b)/2)
		for i := 2; i+1 < len(b); i += 2 {
			u = append(u, uint16(b[i])<<8|uint16(b[i+1]))
		}
		return string(utf16.Decode(u))
	}
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}
