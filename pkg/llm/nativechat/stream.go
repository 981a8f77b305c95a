package nativechat

import (
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// lineStream collects an answer's text as it arrives and passes it on line by line,
// up to the first line that cites: the chat worker relays text whose [n] markers cite
// the sources it knew when the call started (none, for a model that searches itself),
// and the answer's markers are only known once its text is converted, so the text
// from the first citing line on is left to the stored answer, which completes the
// stream. A line passed on is the line as the conversion leaves a line that cites
// nothing (clean), so what was passed on is always a prefix of the answer.
type lineStream struct {
	onDelta func(llm.Delta)
	cites   func(line string) bool
	clean   func(line string) string
	text    strings.Builder // everything pushed
	line    strings.Builder // the current line
	stopped bool            // a citing line was reached: nothing more is passed on
	wrote   bool            // text has arrived since the last separate
}

// push takes text in and passes on each line it completes.
func (l *lineStream) push(s string) {
	if s == "" {
		return
	}
	l.wrote = true
	l.text.WriteString(s)
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			l.line.WriteString(s)
			return
		}
		l.line.WriteString(s[:i+1])
		s = s[i+1:]
		line := l.line.String()
		l.line.Reset()
		if l.stopped || l.cites(line) {
			l.stopped = true
			continue
		}
		if out := l.clean(line); out != "" && l.onDelta != nil {
			l.onDelta(llm.Delta{Text: out})
		}
	}
}

// separate starts a new paragraph before the next round's text, if this one wrote any.
func (l *lineStream) separate() {
	if l.wrote {
		l.push("\n\n")
		l.wrote = false
	}
}

// String is the whole text pushed.
func (l *lineStream) String() string { return l.text.String() }
