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

// scanState collects the built-in phrases the text holds. It records sets, not first
// occurrences, so of several matches for one rule the phrase listed first in the
// tables (lowest id) is reported.
type scanState struct {
	hard   uint32 // English hard phrases seen, bit per id
	verbs  uint16 // verbs seen, bit per id
	nouns  uint16 // nouns seen, bit per id
	direct bool   // 上网
	google bool   // "google" or 谷歌 seen
}

// classify tries every phrase where it can start: the Chinese phrases at each
// character's first byte, the English ones at each word start (an ASCII letter after a
// byte that is not a letter or digit), "/search" at each slash that starts a word;
// the opt-in keywords only when no built-in rule fired. It returns early only on a
// zh-hard hit, the rule with the highest precedence, which is Google-preferred by
// definition.
func classify(s string, extra []KeywordSet) verdict {
	var st scanState
	for i := 0; i < len(s); i++ {
		c := lower(s[i])
		switch {
		case s[i] >= 0xC0: // the first byte of a multi-byte character
			if hit, ok := st.chinese(s[i:]); ok {
				return verdict{Result: Result{WebSearch: true, GooglePreferred: true, Rule: RuleZhHard, Match: hit}}
			}
		case c-'a' < 26 && (i == 0 || !isAlnum(s[i-1])):
			st.english(s, i, enGates[c-'a'])
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
		set, match, ok := extraHit(s, extra)
		if !ok {
			return verdict{}
		}
		return verdict{Result: Result{WebSearch: true, GooglePreferred: st.google, Rule: extraRule, Match: match}, set: set}
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
			e, ok := matchFold(s, end, p.text[len(g.stem):])
			if ok && endsWord(s, e, p.whole) {
				st.record(p)
			}
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
			st.record(p)
		}
		break
	}
	return "", false
}

// slashSearch looks for "/search" at a word start ("/search foo", not
// "example.com/search").
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

// extraHit finds the first opt-in keyword, in configuration order, that s holds: one
// that starts with an ASCII byte at a word start (and, in a Whole set, ending a word),
// any other wherever it occurs (Chinese and Japanese text has no word starts to speak
// of). Keywords are trimmed of white space; an empty one matches nothing.
func extraHit(s string, extra []KeywordSet) (set int, match string, ok bool) {
	for si := range extra {
		whole := wholeOf(&extra[si])
		for _, kw := range keywordsOf(&extra[si]) {
			kw = strings.TrimSpace(kw)
			switch {
			case kw == "":
			case kw[0] >= utf8.RuneSelf:
				if strings.Contains(s, kw) {
					return si, kw, true
				}
			case atWordStart(s, kw, whole):
				return si, kw, true
			}
		}
	}
	return 0, "", false
}

// atWordStart reports whether kw occurs in s where a word starts (the byte before is
// not an ASCII letter or digit), ending a word too when whole is set. It looks only
// where kw's first byte is, in either case.
func atWordStart(s, kw string, whole bool) bool {
	c := lower(kw[0])
	return foundAt(s, c, kw, whole) || c-'a' < 26 && foundAt(s, c-('a'-'A'), kw, whole)
}

// foundAt is atWordStart at the bytes b of s.
func foundAt(s string, b byte, kw string, whole bool) bool {
	for i := 0; i < len(s); i++ {
		j := strings.IndexByte(s[i:], b)
		if j < 0 {
			return false
		}
		i += j
		if i > 0 && isAlnum(s[i-1]) {
			continue
		}
		if e, ok := matchFold(s, i, kw); ok && endsWord(s, e, whole) {
			return true
		}
	}
	return false
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

// endsWord reports whether a match ending at e (exclusive) ends a word, as a whole
// phrase or a Whole set requires.
func endsWord(s string, e int, whole bool) bool {
	return !whole || e >= len(s) || !isAlnum(s[e])
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

func isAlnum(b byte) bool { return b-'0' < 10 || (b|0x20)-'a' < 26 }

func isSpace(b byte) bool { return b == ' ' || b-'\t' < 5 } // \t \n \v \f \r

func lower(b byte) byte {
	if b-'A' < 26 {
		return b + ('a' - 'A')
	}
	return b
}
