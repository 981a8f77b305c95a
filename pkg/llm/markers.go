package llm

import (
	"strconv"
	"unicode/utf8"
)

// Marker is a "[n]" citation marker of an answer: the source it cites (1-based) and
// its character (code point) offsets, end exclusive, as OpenAI reports annotations.
type Marker struct {
	N          int
	Start, End int
}

// CitationMarkers finds the "[n]" markers of text that cite one of sources numbered
// sources (1…sources); other bracketed numbers are text. Every streamed and
// non-streamed rendering of an answer's citations reads its markers here.
func CitationMarkers(text string, sources int) []Marker {
	var out []Marker
	chars := 0
	for i := 0; i < len(text); {
		if text[i] == '[' {
			j := i + 1
			for j < len(text) && j-i <= 4 && text[j] >= '0' && text[j] <= '9' {
				j++
			}
			if j > i+1 && j < len(text) && text[j] == ']' {
				n, _ := strconv.Atoi(text[i+1 : j])
				if n >= 1 && n <= sources {
					out = append(out, Marker{N: n, Start: chars, End: chars + j + 1 - i})
				}
				chars += j + 1 - i // the marker is ASCII
				i = j + 1
				continue
			}
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
		chars++
	}
	return out
}
