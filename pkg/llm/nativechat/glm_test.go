package nativechat_test

import (
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
)

// A result's title suffix is read once, for main models and both GLM engines: its
// Beijing wall-clock time (the day alone, when that is all it gives), and a suffix
// without a date is still not part of the title.
func TestGLMTitle(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, title string
		want      time.Time
	}{
		{"April 23 Highlights (Published: 2025-04-23 07:07:00)", "April 23 Highlights", time.Date(2025, 4, 22, 23, 7, 0, 0, time.UTC)},
		{"4月23日财经焦点（发布时间：2026-01-27）", "4月23日财经焦点", time.Date(2026, 1, 26, 16, 0, 0, 0, time.UTC)},
		{"Undated (Published: unknown)", "Undated", time.Time{}},
		{"No suffix (2025)", "No suffix (2025)", time.Time{}},
	} {
		title, at := nativechat.GLMTitle(c.in)
		if title != c.title || !at.Equal(c.want) {
			t.Errorf("GLMTitle(%q) = %q, %v; want %q, %v", c.in, title, at, c.title, c.want)
		}
	}
}
