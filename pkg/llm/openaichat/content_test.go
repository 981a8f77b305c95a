package openaichat_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A Chat message's content reads as a string, as parts, or as nothing (null); any
// other value is refused naming the message.
func TestChatContentForms(t *testing.T) {
	t.Parallel()
	for content, want := range map[string]string{
		`"plain \u0041"`: "plain A",
		`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`: "a\nb",
		`null`:                       "",
		`7`:                          "'messages[1].content' must be a string or an array of content parts",
		`{"type":"text"}`:            "'messages[1].content' must be a string or an array of content parts",
		`[{"type":"text","text":7}]`: "'messages[1].content' must be a string or an array of content parts",
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":` + content + `}]}`
		r, err := openaichat.Client.DecodeRequest([]byte(body))
		if err != nil {
			if err.Error() != want {
				t.Errorf("%s: error %q, want %q", content, err, want)
			}
			continue
		}
		if got := wire.LatestUserText(r.Messages); got != want {
			t.Errorf("%s: text %q, want %q", content, got, want)
		}
	}
}
