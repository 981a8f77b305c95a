package intent

import (
	"math/bits"
	"strings"
	"unicode/utf8"
)

// verdict is a Result plus the index of the opt-in set that fired.
type verdict struct {
	Result
	set int
}

// scanState collects what the pass over the text saw. It records sets, not first
// occurrences, so the verdict does not depend on the order in which the pass visits
// candidates: of several matches for one rule, the phrase listed first in the tables
// (lowest id) is reported.
type scanState struct {
	hard   uint32 // English hard phrases seen, bit per id
	verbs  uint16 // verbs seen, bit per id
	nouns  uint16 // nouns seen, bit per id
	direct bool   // 上网
	google bool   // "google" or 谷歌 seen

	// The first matching opt-in keyword in configuration order.
	extraSet   int // set index + 1, 0 when none
	extraKw    int // keyword index within the set
	extraMatch string
}

// classify looks at the text once. It returns early only on a zh-hard hit, the rule
// with the highest precedence, which is Google-preferred by definition.
//
// The pass does not test every byte with a branch: that costs a mispredicted branch
// per word boundary (3.5 ns/byte measured, 7 µs for 2 KB). It classifies 8 bytes at a
// time with word-wide arithmetic (blockMasks), gets one bit per byte in a 64-bit mask
// per 64-byte block, and visits only the candidates: word starts (an ASCII letter
// after a byte that is not a letter or digit) and, in blocks that have any, lead bytes
// of multi-byte characters. A word start gets a closer look only when its first bytes
// can begin a keyword (see filter). "/search", the one built-in phrase that does not
// start with a letter, is found with strings.IndexByte; so are opt-in keywords that
// start with a digit or punctuation.
func classify(s string, extra []KeywordSet) verdict {
	var st scanState
	var f filter
	f.addBuiltin()
	letterExtra, otherExtra, zhExtra, nonASCIIExtra := f.addExtra(extra)

	n := len(s)
	var prevLast uint64 // 1 when the last byte of the previous block is a letter
	for base := 0; base < n; base += 64 {
		letters, lead := blockMasks(s, base)
		// letters is transposed (see masks): the byte before the one at bit b
		// is at bit b-8, or for bits 0..7 (bytes 0, 8, …, 56) at bits 55..62, or
		// in the previous block.
		prev := letters<<8 | (letters>>56<<1)&0xFF | prevLast
		prevLast = letters >> 63
		for m := letters &^ prev; m != 0; m &= m - 1 {
			b := bits.TrailingZeros64(m)
			i := base + (b&7)<<3 + b>>3
			var w uint32 // the first four bytes of the word
			if i+4 <= n {
				t := s[i : i+4]
				w = uint32(t[0]) | uint32(t[1])<<8 | uint32(t[2])<<16 | uint32(t[3])<<24
			} else {
				w = tail4(s, i)
			}
			// |0x20 lower-cases letters, leaves digits alone and never turns any
			// other byte into a letter, so a keyword's first bytes (letters and
			// digits) hash like any text they match.
			w |= 0x20202020
			builtin := f.tri.has(triHash(w))
			optIn := letterExtra && f.optIn(w)
			if !builtin && !optIn {
				continue
			}
			if i > 0 && s[i-1]-'0' < 10 {
				continue // "2web": a letter after a digit does not start a word
			}
			if builtin {
				st.english(s, i, enGates[byte(w)-'a'])
			}
			if optIn {
				st.extras(s, i, extra)
			}
		}
		for m := lead; m != 0; m &= m - 1 {
			i := base + bits.TrailingZeros64(m)
			if zhExtra && f.passExtraZh(s[i:]) {
				st.extrasZh(s[i:], extra)
			}
			if !f.passZh(s[i:]) {
				continue
			}
			if hit, ok := st.chinese(s[i:]); ok {
				return verdict{Result: Result{WebSearch: true, GooglePreferred: true, Rule: RuleZhHard, Match: hit}}
			}
		}
	}
	st.slashSearch(s)

	var r Result
	switch {
	case st.hard != 0:
		r = Result{Rule: RuleEnHard, Match: enHard[bits.TrailingZeros32(st.hard)]}
	case st.direct:
		r = Result{Rule: RuleZhSoft, Match: "上网"}
	case st.verbs&zhVerbs != 0 && st.nouns&zhNouns != 0:
		r = Result{Rule: RuleZhSoft, Match: softMatch[lowest(st.verbs&zhVerbs)][lowest(st.nouns&zhNouns)]}
	case st.verbs&^zhVerbs != 0 && st.nouns&^zhNouns != 0:
		r = Result{Rule: RuleEnSoft, Match: softMatch[lowest(st.verbs&^zhVerbs)][lowest(st.nouns&^zhNouns)]}
	case st.verbs != 0 && st.nouns != 0:
		// A verb of one language with a noun of the other: named after the verb.
		v := lowest(st.verbs)
		r = Result{Rule: RuleEnSoft, Match: softMatch[v][lowest(st.nouns)]}
		if zhVerbs>>v&1 != 0 {
			r.Rule = RuleZhSoft
		}
	default:
		if otherExtra {
			st.extrasOther(s, extra)
		}
		if nonASCIIExtra {
			st.extrasSubstring(s, extra)
		}
		if st.extraSet == 0 {
			return verdict{}
		}
		return verdict{
			Result: Result{WebSearch: true, GooglePreferred: st.google, Rule: extraRule, Match: st.extraMatch},
			set:    st.extraSet - 1,
		}
	}
	r.WebSearch = true
	r.GooglePreferred = st.google
	return verdict{Result: r}
}

func lowest(set uint16) int { return bits.TrailingZeros16(set) }

// english tests the gates of one letter at the word start s[i].
func (st *scanState) english(s string, i int, gates []gate) {
	for gi := range gates {
		g := &gates[gi]
		end, ok := matchFold(s, i, g.stem)
		if !ok {
			continue
		}
		for pi := range g.phrases {
			p := &g.phrases[pi]
			if !st.wants(p) {
				continue
			}
			e, ok := matchFold(s, end, p.text[len(g.stem):])
			if !ok || p.whole && e < len(s) && isAlnum(s[e]) {
				continue
			}
			st.record(p)
		}
	}
}

// chinese tests the phrases that start with the character at the start of s. It
// reports a zh-hard hit, which ends the scan.
func (st *scanState) chinese(s string) (string, bool) {
	r, _ := utf8.DecodeRuneInString(s)
	for gi := range zhGroups {
		if zhGroups[gi].first != r {
			continue
		}
		for pi := range zhGroups[gi].phrases {
			p := &zhGroups[gi].phrases[pi]
			if !strings.HasPrefix(s, p.text) {
				continue
			}
			if p.kind == hard {
				return p.text, true
			}
			if st.wants(p) {
				st.record(p)
			}
		}
		break
	}
	return "", false
}

// slashSearch looks for "/search" at a word start ("/search foo", not
// "example.com/search"); the block masks do not mark punctuation.
func (st *scanState) slashSearch(s string) {
	for i := 0; i < len(s); i++ {
		j := strings.IndexByte(s[i:], '/')
		if j < 0 {
			return
		}
		i += j
		if i == 0 || !isAlnum(s[i-1]) {
			if _, ok := matchFold(s, i, enHard[hSlashSearch]); ok {
				st.hard |= 1 << hSlashSearch
				return
			}
		}
	}
}

// wants reports whether matching p could still change the verdict; it keeps the pass
// from re-testing phrases it has already seen.
func (st *scanState) wants(p *phrase) bool {
	if p.google && !st.google {
		return true
	}
	switch p.kind {
	case hard:
		return st.hard>>p.id&1 == 0
	case verb:
		return st.verbs>>p.id&1 == 0
	case noun:
		return st.nouns>>p.id&1 == 0
	case direct:
		return !st.direct
	}
	return false
}

func (st *scanState) record(p *phrase) {
	if p.google {
		st.google = true
	}
	switch p.kind {
	case hard:
		st.hard |= 1 << p.id
	case verb:
		st.verbs |= 1 << p.id
	case noun:
		st.nouns |= 1 << p.id
	case direct:
		st.direct = true
	}
}

// keywordsOf returns the keywords of ks, standing in Freshness for an empty set named
// FreshnessName.
func keywordsOf(ks *KeywordSet) []string {
	if len(ks.Keywords) == 0 && ks.Name == FreshnessName {
		return Freshness.Keywords
	}
	return ks.Keywords
}

// wholeOf reports whether the keywords of ks match whole words only.
func wholeOf(ks *KeywordSet) bool {
	if len(ks.Keywords) == 0 && ks.Name == FreshnessName {
		return Freshness.Whole
	}
	return ks.Whole
}

// endsWord reports whether a match ending at e (exclusive) ends a word, as a Whole
// set requires.
func endsWord(s string, e int, whole bool) bool {
	return !whole || e >= len(s) || !isAlnum(s[e])
}

// foundExtra records opt-in keyword k of set si when it comes before the one found so
// far in configuration order.
func (st *scanState) foundExtra(si, k int, kw string) {
	if st.extraSet == 0 || si+1 < st.extraSet || si+1 == st.extraSet && k < st.extraKw {
		st.extraSet, st.extraKw, st.extraMatch = si+1, k, kw
	}
}

// before reports whether keyword k of set si comes before the opt-in match found so
// far, so a pass can skip keywords that cannot change the verdict.
func (st *scanState) before(si, k int) bool {
	return st.extraSet == 0 || si+1 < st.extraSet || si+1 == st.extraSet && k < st.extraKw
}

// extras tests the opt-in keywords that start with an ASCII letter at the word start
// s[i].
func (st *scanState) extras(s string, i int, extra []KeywordSet) {
	c1 := lower(s[i])
	for si := range extra {
		whole := wholeOf(&extra[si])
		for k, kw := range keywordsOf(&extra[si]) {
			if !st.before(si, k) {
				return
			}
			kw = trimKeyword(kw)
			if kw == "" || lower(kw[0]) != c1 {
				continue
			}
			if e, ok := matchFold(s, i, kw); ok && endsWord(s, e, whole) {
				st.foundExtra(si, k, kw)
				return
			}
		}
	}
}

// extrasOther tests the opt-in keywords that start with an ASCII byte other than a
// letter ("#news", "5g") wherever that byte starts a word.
func (st *scanState) extrasOther(s string, extra []KeywordSet) {
	for si := range extra {
		whole := wholeOf(&extra[si])
		for k, kw := range keywordsOf(&extra[si]) {
			kw = trimKeyword(kw)
			if kw == "" || kw[0] >= utf8.RuneSelf || isLetter(kw[0]) || !st.before(si, k) {
				continue
			}
			for i := 0; i < len(s); i++ {
				j := strings.IndexByte(s[i:], kw[0])
				if j < 0 {
					break
				}
				i += j
				if i == 0 || !isAlnum(s[i-1]) {
					if e, ok := matchFold(s, i, kw); ok && endsWord(s, e, whole) {
						st.foundExtra(si, k, kw)
						break
					}
				}
			}
		}
	}
}

// zhKeyword reports whether kw starts with a three-byte UTF-8 lead byte (most of
// CJK) and is long enough to be tested where the main pass visits lead bytes.
func zhKeyword(kw string) bool { return len(kw) >= 3 && kw[0] >= 0xE0 && kw[0] < 0xF0 }

// extrasZh tests the opt-in keywords that start with a three-byte character at the
// start of s, which starts with a lead byte. Chinese and Japanese text has no word
// starts to speak of, so they match wherever they occur.
func (st *scanState) extrasZh(s string, extra []KeywordSet) {
	for si := range extra {
		for k, kw := range keywordsOf(&extra[si]) {
			if !st.before(si, k) {
				return
			}
			if !mayStartWith(kw, s) {
				continue
			}
			kw = trimKeyword(kw)
			if zhKeyword(kw) && strings.HasPrefix(s, kw) {
				st.foundExtra(si, k, kw)
				return
			}
		}
	}
}

// trimKeyword is strings.TrimSpace(kw), with a fast path for keywords that plainly
// neither start nor end with white space: an ASCII byte other than white space or
// a byte no Unicode space starts with at the start, and an ASCII byte other than
// white space or a whole character U+4000-U+9FFF (most of CJK) at the end.
// TrimSpace decodes non-ASCII keywords rune by rune, which showed in the profile of
// every classification with the Chinese Freshness keywords.
func trimKeyword(kw string) string {
	n := len(kw)
	if n == 0 {
		return kw
	}
	b, e := kw[0], kw[n-1]
	startPlain := b > ' ' && b != 0xC2 && b != 0xE1 && b != 0xE2 && b != 0xE3
	endPlain := e > ' ' && e < utf8.RuneSelf ||
		n >= 3 && kw[n-3] >= 0xE4 && kw[n-3] <= 0xE9 && kw[n-2]&0xC0 == 0x80 && e&0xC0 == 0x80
	if startPlain && endPlain {
		return kw
	}
	return strings.TrimSpace(kw)
}

// mayStartWith reports whether keyword kw, before strings.TrimSpace, can start with
// the three-byte character at the start of s: it does, or it starts with white space
// (ASCII, or a Unicode space, whose first byte is 0xC2, 0xE1, 0xE2 or 0xE3). It saves
// extrasZh trimming every non-ASCII keyword at every candidate, which is slow.
func mayStartWith(kw, s string) bool {
	if len(kw) < 3 {
		return false
	}
	switch b := kw[0]; {
	case b <= ' ', b == 0xC2, b == 0xE1, b == 0xE2, b == 0xE3:
		return true
	default:
		return b == s[0] && kw[1] == s[1] && kw[2] == s[2]
	}
}

// extrasSubstring tests the other opt-in keywords that start with a non-ASCII byte
// (see zhKeyword), as exact substrings.
func (st *scanState) extrasSubstring(s string, extra []KeywordSet) {
	for si := range extra {
		for k, kw := range keywordsOf(&extra[si]) {
			kw = trimKeyword(kw)
			if kw == "" || kw[0] < utf8.RuneSelf || zhKeyword(kw) || !st.before(si, k) {
				continue
			}
			if strings.Contains(s, kw) {
				st.foundExtra(si, k, kw)
			}
		}
	}
}

// filter is the candidate filter of one classify call, built on the stack in a few
// nanoseconds. A word start passes when the hash of its first three bytes (ASCII
// letters lower-cased) is in tri: every gate stem is at least three letters long, so
// a word that starts a keyword always passes; words that merely share a stem's first
// three letters ("interface", "newer") or collide in the hash pass too and only cost
// a closer look. Opt-in keywords have their own sets, by their first four bytes when
// those are letters or digits (so "forecast" does not stop at every "for"), else by
// their first three, else by their first letter. Bit b2&63 of zh[b1&15] is set when a
// Chinese first character starts with the bytes b1 b2.
type filter struct {
	tri       bitset1024
	zh        [16]uint64
	extraZh   bitset1024 // first characters of opt-in keywords that pass zhKeyword
	extraQuad bitset1024
	extraTri  bitset1024
	first     [4]uint64 // first letters (lower-cased) of the other opt-in keywords
}

// bitset1024 is a set of 10-bit hashes.
type bitset1024 [16]uint64

func (b *bitset1024) add(h uint32)      { b[h>>6] |= 1 << (h & 63) }
func (b *bitset1024) has(h uint32) bool { return b[h>>6]>>(h&63)&1 != 0 }

// triHash maps the low three bytes of w to 10 bits; quadHash maps all four.
func triHash(w uint32) uint32  { return (w & 0xFFFFFF * 0x9E3779B1) >> 22 }
func quadHash(w uint32) uint32 { return (w * 0x9E3779B1) >> 22 }

func (f *filter) addBuiltin() {
	for _, gs := range enGates {
		for _, g := range gs {
			f.tri.add(triHash(uint32(g.stem[0]) | uint32(g.stem[1])<<8 | uint32(g.stem[2])<<16))
		}
	}
	for _, g := range zhGroups {
		var b [utf8.UTFMax]byte
		utf8.EncodeRune(b[:], g.first)
		f.zh[b[0]&15] |= 1 << (b[1] & 63)
	}
}

// optIn reports whether a word whose first four bytes, lower-cased, are w can start an
// opt-in keyword that starts with a letter.
func (f *filter) optIn(w uint32) bool {
	c1 := byte(w)
	return f.extraQuad.has(quadHash(w)) || f.extraTri.has(triHash(w)) || f.first[c1>>6]>>(c1&63)&1 != 0
}

// tail4 returns the bytes s[i:i+4] as a little-endian word, padded with zero bytes
// past the end of s.
func tail4(s string, i int) uint32 {
	var w uint32
	for k := 0; i+k < len(s) && k < 4; k++ {
		w |= uint32(s[i+k]) << (8 * k)
	}
	return w
}

// addExtra adds the opt-in keywords. It reports whether there are keywords that start
// with an ASCII letter (tested at word starts in the main pass), with another ASCII
// byte (tested by extrasOther), with a three-byte character (tested at lead bytes in
// the main pass, see zhKeyword) and with another non-ASCII byte (extrasSubstring).
func (f *filter) addExtra(extra []KeywordSet) (letter, other, zh, nonASCII bool) {
	for i := range extra {
		for _, kw := range keywordsOf(&extra[i]) {
			kw = trimKeyword(kw)
			switch {
			case kw == "":
			case zhKeyword(kw):
				zh = true
				f.extraZh.add(triHash(uint32(kw[0]) | uint32(kw[1])<<8 | uint32(kw[2])<<16))
			case kw[0] >= utf8.RuneSelf:
				nonASCII = true
			case !isLetter(kw[0]):
				other = true
			default:
				letter = true
				var w uint32
				k := 0
				for k < len(kw) && k < 4 && isAlnum(kw[k]) {
					w |= uint32(kw[k]|0x20) << (8 * k)
					k++
				}
				switch k {
				case 4:
					f.extraQuad.add(quadHash(w))
				case 3:
					f.extraTri.add(triHash(w))
				default:
					c1 := lower(kw[0])
					f.first[c1>>6] |= 1 << (c1 & 63)
				}
			}
		}
	}
	return letter, other, zh, nonASCII
}

// passExtraZh reports whether the character at the start of s can start an opt-in
// keyword that passes zhKeyword; s starts with a lead byte. It hashes the whole
// three-byte character: common Chinese characters share their first two bytes with
// a keyword's far too often for the cheaper test of passZh.
func (f *filter) passExtraZh(s string) bool {
	return s[0] >= 0xE0 && s[0] < 0xF0 && len(s) >= 3 &&
		f.extraZh.has(triHash(uint32(s[0])|uint32(s[1])<<8|uint32(s[2])<<16))
}

// passZh reports whether the character at the start of s can start a Chinese phrase;
// s starts with a lead byte.
func (f *filter) passZh(s string) bool {
	return s[0] >= 0xE0 && s[0] < 0xF0 && len(s) >= 3 && f.zh[s[0]&15]>>(s[1]&63)&1 != 0
}

// Word-wide constants for classify8.
const (
	ones = 0x0101010101010101
	hi   = 0x8080808080808080 // the high bit of every byte
	lo7  = 0x7f7f7f7f7f7f7f7f
)

// blockMasks classifies the 64 bytes s[base:base+64] (fewer at the end of s: the
// missing bytes count as zero bytes, which are in neither class).
func blockMasks(s string, base int) (letters, lead uint64) {
	if base+64 <= len(s) {
		b := s[base : base+64]
		return masks(load8(b[0:8]), load8(b[8:16]), load8(b[16:24]), load8(b[24:32]),
			load8(b[32:40]), load8(b[40:48]), load8(b[48:56]), load8(b[56:64]))
	}
	var x [8]uint64
	for k := range x {
		x[k] = loadPartial(s, base+8*k)
	}
	return masks(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7])
}

// masks classifies 64 bytes given as eight little-endian words.
//
// letters marks ASCII letters, transposed: bit 8j+k is byte 8k+j. Moving the high bit
// of each byte of word k down by 7-k costs one shift, where packing in byte order
// costs a multiply; the scan does not care in which order it visits word starts.
// lead marks the first bytes of multi-byte UTF-8 sequences (0b11xxxxxx) in byte
// order: bit k is byte k. It is computed only when there is a non-ASCII byte.
func masks(x0, x1, x2, x3, x4, x5, x6, x7 uint64) (letters, lead uint64) {
	letters = letterBits(x0)>>7 | letterBits(x1)>>6 | letterBits(x2)>>5 | letterBits(x3)>>4 |
		letterBits(x4)>>3 | letterBits(x5)>>2 | letterBits(x6)>>1 | letterBits(x7)
	if (x0|x1|x2|x3|x4|x5|x6|x7)&hi != 0 {
		lead = leadBits(x0) | leadBits(x1)<<8 | leadBits(x2)<<16 | leadBits(x3)<<24 |
			leadBits(x4)<<32 | leadBits(x5)<<40 | leadBits(x6)<<48 | leadBits(x7)<<56
	}
	return letters, lead
}

// letterBits sets the high bit of every byte of x that is an ASCII letter, and
// clears all other bits. A byte is tested by adding a constant to its low 7 bits (no
// sum carries into the next byte) and reading the high bit.
func letterBits(x uint64) uint64 {
	l := x&^hi | 0x20*ones                              // ASCII letters to lower case
	return (l + 0x1f*ones) &^ (l + 0x05*ones) &^ x & hi // 0x61 <= l <= 0x7a, x < 0x80
}

// leadBits returns one bit per byte of x (bit k is byte k), set for bytes with the
// high bit and bit 6 set: the first bytes of multi-byte UTF-8 sequences.
func leadBits(x uint64) uint64 { return movemask(x & (x << 1)) }

// loadPartial returns the bytes s[i:i+8] as a little-endian word, padded with zero
// bytes past the end of s.
func loadPartial(s string, i int) uint64 {
	var x uint64
	for k := 0; i+k < len(s) && k < 8; k++ {
		x |= uint64(s[i+k]) << (8 * k)
	}
	return x
}

// load8 returns the first 8 bytes of s as a little-endian word; the compiler turns it
// into one load.
func load8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// movemask packs the high bits of the 8 bytes of v into its low 8 bits: the multiply
// moves the high bit of byte j to bit 56+j, with no two partial products overlapping.
func movemask(v uint64) uint64 {
	return (v & hi >> 7 * 0x0102040810204080) >> 56
}

// matchFold reports whether kw occurs in s at i, comparing ASCII letters without case,
// and returns the index just past the match. A space in kw matches a run of one or
// more ASCII white space bytes; every other byte, non-ASCII ones included, matches
// itself.
func matchFold(s string, i int, kw string) (int, bool) {
	for k := 0; k < len(kw); k++ {
		c := kw[k]
		if c == ' ' {
			for k+1 < len(kw) && kw[k+1] == ' ' {
				k++
			}
			if i >= len(s) || !isSpace(s[i]) {
				return i, false
			}
			i++
			for i < len(s) && isSpace(s[i]) {
				i++
			}
			continue
		}
		if i >= len(s) || lower(s[i]) != lower(c) {
			return i, false
		}
		i++
	}
	return i, true
}

func isLetter(b byte) bool { return (b|0x20)-'a' < 26 }

func isAlnum(b byte) bool { return b-'0' < 10 || (b|0x20)-'a' < 26 }

func isSpace(b byte) bool { return b == ' ' || b-'\t' < 5 } // \t \n \v \f \r

func lower(b byte) byte {
	if b-'A' < 26 {
		return b + ('a' - 'A')
	}
	return b
}
