package engines

import (
	"testing"
	"time"
)

// readDate reads every ISO shape providers write as the first of isoLayouts that fits.
func TestReadDateISOShapes(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	inOrder := func(s string) time.Time {
		for _, layout := range isoLayouts {
			if d, err := time.Parse(layout, s); err == nil {
				return d
			}
		}
		return time.Time{}
	}
	for _, s := range []string{"2026-03-05", "2026-03-05T10:20:30", "2026-03-05T10:20:30.123456", "2026-03-05 10:20:30",
		"2026-03-05 10:20:30.5", "2026-03-05T10:20:30Z", "2026-03-05T10:20:30.25Z", "2026-03-05T10:20:30+02:00", "2026-03-05T10:20:30-05:30"} {
		want := inOrder(s)
		if want.IsZero() {
			t.Fatalf("%q: no ISO layout reads it", s)
		}
		if got := readDate(s, now); !got.Equal(want) || got.Location().String() != want.Location().String() {
			t.Errorf("readDate(%q) = %v, want %v", s, got, want)
		}
	}
}

// BenchmarkReadDate is Brave's page_age: a time without a zone, read for every hit.
func BenchmarkReadDate(b *testing.B) {
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		readDate("2026-03-05T10:20:30", now)
	}
}
