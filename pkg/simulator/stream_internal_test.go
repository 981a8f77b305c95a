package simulator

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", []string{"   "}},
		{"Hello, world!", []string{"Hello", ",", " world", "!"}},
		{"  lead and trail  ", []string{"  lead", " and", " trail  "}},
		{"今天 sunny [1].", []string{"今", "天", " sunny", " [", "1", "]", "."}},
		{`{"query":"x y"}`, []string{"{", `"`, "query", `"`, ":", `"`, "x", " y", `"`, "}"}},
		{"a\xffb", []string{"a", "\xff", "b"}},
	}
	for _, c := range cases {
		got := tokens(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("tokens(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Join(got, "") != c.in {
			t.Errorf("tokens(%q) do not join back", c.in)
		}
	}
}

func TestTokenDelay(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]time.Duration{
		"no directive":                    0,
		"x sim:token-delay=20ms y":        20 * time.Millisecond,
		"sim:token-delay=1.5s":            1500 * time.Millisecond,
		"sim:token-delay=fast":            0,
		"sim:slow=1s sim:token-delay=5ms": 5 * time.Millisecond,
	} {
		if got := tokenDelay(text); got != want {
			t.Errorf("tokenDelay(%q) = %v, want %v", text, got, want)
		}
	}
}
