package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// plainEvery is how often progress is printed when the output is not a terminal
// (a log, a pipe): a line at most this often while the counts move, and one at every
// status change.
const plainEvery = 5 * time.Second

// barWidth is the width of the terminal progress bar.
const barWidth = 30

// progress shows a batch's progress: on a terminal, one line redrawn in place; else
// a line now and then. Rate and ETA are measured from when watching began.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	// base is how many lines were done when watching began.
	base int
	seen bool
	// lastStatus, lastDone and lastAt are what the last plain line showed, and when.
	lastStatus string
	lastDone   int
	lastAt     time.Time
}

func newProgress(w io.Writer, tty bool, now time.Time) *progress {
	return &progress{w: w, tty: tty, start: now}
}

// update shows the batch as just read.
func (p *progress) update(b batch, now time.Time) {
	c := b.RequestCounts
	done := c.Completed + c.Failed
	if !p.seen {
		p.base, p.seen = done, true
	}
	if b.ended() {
		return // finish prints the last line
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s %s", bar(done, c.Total), p.stats(b, now))
		return
	}
	if b.Status == p.lastStatus && (done == p.lastDone || now.Sub(p.lastAt) < plainEvery) {
		return
	}
	p.lastStatus, p.lastDone, p.lastAt = b.Status, done, now
	fmt.Fprintln(p.w, p.stats(b, now))
}

// finish prints the final counts of a batch that has ended.
func (p *progress) finish(b batch, now time.Time) {
	c := b.RequestCounts
	elapsed := now.Sub(p.start)
	line := fmt.Sprintf("%s %d/%d (%d completed, %d failed) in %s", b.Status, c.Completed+c.Failed, c.Total, c.Completed, c.Failed, round(elapsed))
	if r := p.rate(c.Completed+c.Failed, elapsed); r > 0 {
		line += fmt.Sprintf(", %.1f/s", r)
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s %s\n", bar(c.Completed+c.Failed, c.Total), line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// stats is the progress text: status, counts, rate and ETA.
func (p *progress) stats(b batch, now time.Time) string {
	c := b.RequestCounts
	done := c.Completed + c.Failed
	s := fmt.Sprintf("%s %d/%d (%d completed, %d failed)", b.Status, done, c.Total, c.Completed, c.Failed)
	r := p.rate(done, now.Sub(p.start))
	if r <= 0 {
		return s + ", ETA -"
	}
	eta := time.Duration(float64(c.Total-done) / r * float64(time.Second))
	return s + fmt.Sprintf(", %.1f/s, ETA %s", r, round(eta))
}

// rate is lines per second since watching began.
func (p *progress) rate(done int, elapsed time.Duration) float64 {
	if elapsed <= 0 || done <= p.base {
		return 0
	}
	return float64(done-p.base) / elapsed.Seconds()
}

// bar draws [#####-----] for done of total.
func bar(done, total int) string {
	n := 0
	if total > 0 {
		n = min(done*barWidth/total, barWidth)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", barWidth-n) + "]"
}
