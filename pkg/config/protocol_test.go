package config_test

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
)

// A provider's protocol selects how its main models are spoken to: any kind may serve
// main models through a named protocol, an unknown protocol is refused with the list,
// and a provider without one speaks OpenAI chat (the kind rule then applies).
func TestProviderProtocol(t *testing.T) {
	t.Parallel()
	ok := `{"providers":{"claude":{"kind":"anthropic","protocol":"anthropic-messages","baseURL":"http://x"},
		"gem":{"kind":"gemini","protocol":"gemini","baseURL":"http://x"},"oai":{"kind":"openai","protocol":"openai-responses","baseURL":"http://x/v1"},
		"chat":{"kind":"openai","baseURL":"http://x/v1"}},
		"models":{"a":{"provider":"claude","model":"claude-sonnet-4-5"},"b":{"provider":"gem","model":"gemini-2.5-flash"},"c":{"provider":"oai","model":"gpt-5"},"d":{"provider":"chat","model":"gpt-4.1"}}}`
	f, err := config.ParseFile([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if f.Providers["claude"].Protocol != "anthropic-messages" || f.Providers["chat"].Protocol != "" {
		t.Errorf("protocols %+v", f.Providers)
	}
	bad := map[string]string{
		`{"providers":{"p":{"kind":"openai","protocol":"grpc","baseURL":"http://x"}}}`:                                                       `providers.p.protocol "grpc" is not a main-model protocol; use one of openai-chat, openai-responses, anthropic-messages, gemini`,
		`{"providers":{"p":{"kind":"anthropic","baseURL":"http://x"}},"models":{"m":{"provider":"p","model":"x"}}}`:                          `unless the provider sets "protocol"`,
		`{"providers":{"p":{"kind":"anthropic","protocol":"openai-chat","baseURL":"http://x"}},"models":{"m":{"provider":"p","model":"x"}}}`: `has kind "anthropic"`,
	}
	for in, want := range bad {
		_, err := config.ParseFile([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n  error %v, want it to mention %q", in, err, want)
		}
	}
}

// A model's webSearch: native needs a protocol whose own search the fleet forwards;
// auto falls back to the fleet's engines elsewhere; other values are refused.
func TestModelWebSearch(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{"providers":{"claude":{"kind":"anthropic","protocol":"anthropic-messages","baseURL":"http://x"},"chat":{"kind":"openai","baseURL":"http://x/v1"}},
		"models":{"n":{"provider":"claude","model":"c","webSearch":"native"},"a":{"provider":"chat","model":"g","webSearch":"auto"},"s":{"provider":"claude","model":"c"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !f.NativeSearch("n") || f.NativeSearch("a") || f.NativeSearch("s") {
		t.Errorf("native: n %v a %v s %v", f.NativeSearch("n"), f.NativeSearch("a"), f.NativeSearch("s"))
	}
	for in, want := range map[string]string{
		`{"providers":{"p":{"kind":"openai","baseURL":"http://x"}},"models":{"m":{"provider":"p","model":"x","webSearch":"native"}}}`: `models["m"].webSearch "native": provider "p" speaks openai-chat, whose own search`,
		`{"providers":{"p":{"kind":"openai","baseURL":"http://x"}},"models":{"m":{"provider":"p","model":"x","webSearch":"always"}}}`: `must be server, native or auto`,
	} {
		if _, err := config.ParseFile([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n  error %v, want %q", in, err, want)
		}
	}
}
