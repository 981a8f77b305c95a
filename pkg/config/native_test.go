package config_test

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
)

// webSearch "native" is accepted for every protocol whose own search the fleet
// forwards (Anthropic Messages, OpenAI Responses, Gemini) and refused, naming them,
// for OpenAI Chat.
func TestNativeSearchProtocols(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{"providers":{"claude":{"kind":"anthropic","protocol":"anthropic-messages","baseURL":"http://x"},
		"gem":{"kind":"gemini","protocol":"gemini","baseURL":"http://x"},"oai":{"kind":"openai","protocol":"openai-responses","baseURL":"http://x/v1"}},
		"models":{"a":{"provider":"claude","model":"c","webSearch":"native"},"g":{"provider":"gem","model":"gemini-2.5-flash","webSearch":"native"},
		"r":{"provider":"oai","model":"gpt-5","webSearch":"auto"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "g", "r"} {
		if !f.NativeSearch(m) {
			t.Errorf("model %s does not search natively", m)
		}
	}
	_, err = config.ParseFile([]byte(`{"providers":{"p":{"kind":"openai","baseURL":"http://x"}},"models":{"m":{"provider":"p","model":"x","webSearch":"native"}}}`))
	if want := "native search works with anthropic-messages, openai-responses and gemini providers and openai-chat providers of kind kimi"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to mention %q", err, want)
	}
}
