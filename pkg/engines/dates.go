package engines

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Dates as providers write them: RFC 3339 and its relatives, "Jan 2, 2006",
// "2006年1月2日", and ages relative to the search ("2 days ago", "3小时前"). Every kind
// reads a hit's date with readDate (or parseDate when the provider only writes
// absolute dates); an unreadable or empty date is the zero time, and the hit stays
// undated.

// parseDate reads the date formats search APIs use; the zero time when none fits.
func parseDate(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02", time.RFC1123, time.RFC1123Z, "Mon, 2 Jan 2006 15:04:05 MST", "January 2, 2006", "Jan 2, 2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// readDate reads a hit's publication date as search APIs and Anthropic's page_age give it: what parseDate
// knows, a few more absolute layouts (fractional seconds without a zone as SearXNG
// writes them, "5 Mar 2025", "2025年3月5日") and relative ages ("2 hours ago",
// "yesterday", "3 天前") counted back from now. The zero time when none fits. The
// string's shape picks the layouts to try first.
func readDate(s string, now time.Time) time.Time {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}
	}
	if strings.HasSuffix(s, "ago") || strings.HasSuffix(s, "前") {
		if t := relativeDate(s, now); !t.IsZero() {
			return t
		}
	}
	var likely []string
	switch {
	case len(s) >= 10 && s[4] == '-':
		likely = isoLayouts
	case s[0] >= 'A' && s[0] <= 'Z':
		likely = monthLayouts
	}
	for _, layout := range likely {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	if t := parseDate(s); !t.IsZero() {
		return t
	}
	for _, layout := range otherLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return relativeDate(s, now)
}

var (
	// isoLayouts: a fraction is optional in Go layouts, so these also read whole seconds.
	isoLayouts   = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"}
	monthLayouts = []string{"Jan 2, 2006", "January 2, 2006"}
	otherLayouts = []string{"2 Jan 2006", "2 January 2006", "Jan 2 2006", "2006年1月2日", "2006/01/02", "2006-1-2"}
)

var (
	relativeEN = regexp.MustCompile(`^(\d+|an?|one)\s*(second|sec|minute|min|hour|hr|day|week|wk|month|mo|year|yr)s?\.?\s+ago$`)
	relativeZH = regexp.MustCompile(`^(\d+)\s*(秒|分钟|小时|天|日|周|星期|个月|月|年)\s*前$`)
)

var relativeUnit = map[string]time.Duration{
	"second": time.Second, "sec": time.Second, "秒": time.Second,
	"minute": time.Minute, "min": time.Minute, "分钟": time.Minute,
	"hour": time.Hour, "hr": time.Hour, "小时": time.Hour,
	"day": 24 * time.Hour, "天": 24 * time.Hour, "日": 24 * time.Hour,
	"week": 7 * 24 * time.Hour, "wk": 7 * 24 * time.Hour, "周": 7 * 24 * time.Hour, "星期": 7 * 24 * time.Hour,
	"month": 30 * 24 * time.Hour, "mo": 30 * 24 * time.Hour, "个月": 30 * 24 * time.Hour, "月": 30 * 24 * time.Hour,
	"year": 365 * 24 * time.Hour, "yr": 365 * 24 * time.Hour, "年": 365 * 24 * time.Hour,
}

// relativeDate reads an age relative to now; the zero time when s is not one.
func relativeDate(s string, now time.Time) time.Time {
	s = strings.ToLower(s)
	switch s {
	case "just now", "now", "刚刚":
		return now
	case "yesterday", "昨天":
		return now.Add(-24 * time.Hour)
	}
	m := relativeEN.FindStringSubmatch(s)
	if m == nil {
		m = relativeZH.FindStringSubmatch(s)
	}
	if m == nil {
		return time.Time{}
	}
	n, unit := 1, relativeUnit[m[2]]
	if m[1] != "a" && m[1] != "an" && m[1] != "one" {
		v, err := strconv.Atoi(m[1])
		if err != nil || v < 0 || unit <= 0 || int64(v) > int64(200*365*24*time.Hour/unit) {
			return time.Time{} // not a number, or further back than a Duration reaches
		}
		n = v
	}
	return now.Add(-time.Duration(n) * unit)
}
