package llm

import (
	"net/http"
	"regexp"
)

// A provider that refuses a model call (a 4xx other than 429 and 408) refuses either
// what the client sent — its content (too long for the model's context, against the
// provider's content policy, an image it cannot read) or one of its own parameters (a
// temperature out of range, max_tokens above the model's limit) — or the request the
// fleet built around it: the conversation's structure, the fleet's tools, the
// provider's credentials or model name. The client can act on the first kind and is
// told the provider's meaning in its own protocol's field names; the second is the
// fleet's failure, a 502 in the fleet's words (the provider's are logged).

// ClientRefusal is a provider's refusal of what the client sent, in the client's
// terms.
type ClientRefusal struct {
	Status  int
	Code    string
	Param   string
	Message string
}

// contentRefusal matches provider messages about the request's content.
var contentRefusal = regexp.MustCompile(`(?i)context[ _-]?length|context window|maximum context|prompt is too long|too many (input )?tokens|input is too long|` +
	`exceeds the (model'?s? )?(maximum|limit)|content[ _-]?(policy|filter|management)|safety|flagged|moderation|invalid[ _]prompt|` +
	`could not process image|invalid image|image (is )?too large|unsupported image`)

// clientParams are the parameters a client sets in any protocol, by the names
// providers use in their messages, and what each protocol calls them.
var clientParams = []struct {
	names                      []string // as providers name it
	chat, responses, anthropic string
}{
	{[]string{"max_output_tokens", "max_completion_tokens", "max_tokens", "maxOutputTokens"}, "max_tokens", "max_output_tokens", "max_tokens"},
	{[]string{"temperature"}, "temperature", "temperature", "temperature"},
	{[]string{"top_p", "topP"}, "top_p", "top_p", "top_p"},
	{[]string{"top_k", "topK"}, "top_k", "top_k", "top_k"},
	{[]string{"stop_sequences", "stopSequences"}, "stop", "stop", "stop_sequences"},
	{[]string{"response_format", "responseSchema", "text.format"}, "response_format", "text.format", "output_format"},
	{[]string{"presence_penalty", "presencePenalty"}, "presence_penalty", "presence_penalty", "presence_penalty"},
	{[]string{"frequency_penalty", "frequencyPenalty"}, "frequency_penalty", "frequency_penalty", "frequency_penalty"},
	{[]string{"seed"}, "seed", "seed", "seed"},
}

// paramWord matches a parameter name as a word of a provider's message.
func paramWord(name string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^A-Za-z0-9_.])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9_])`)
}

var clientParamWords = func() [][]*regexp.Regexp {
	out := make([][]*regexp.Regexp, len(clientParams))
	for i, p := range clientParams {
		for _, n := range p.names {
			out[i] = append(out[i], paramWord(n))
		}
	}
	return out
}()

// ClientRefused reports whether the provider's refusal e is about what the client sent
// in protocol (its stored name: "" or "openai.chat", "openai.responses",
// "anthropic.messages"), and if so, the refusal in the client's terms: the provider's
// status, code and message, with the parameter names of the provider's message given
// as the client's protocol names them. ok is false for a refusal of the request the
// fleet built (its structure, tools, credentials, model name), and for anything but a
// 4xx refusal.
func ClientRefused(e *Error, protocol string) (r ClientRefusal, ok bool) {
	if e == nil || e.Status < 400 || e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout {
		return r, false
	}
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusPaymentRequired:
		return r, false // the fleet's credentials, account or model name
	case http.StatusRequestEntityTooLarge:
		return ClientRefusal{Status: e.Status, Code: e.Code, Message: e.Message}, true
	}
	if contentRefusal.MatchString(e.Message) || contentRefusal.MatchString(e.Code) {
		return ClientRefusal{Status: e.Status, Code: e.Code, Message: e.Message}, true
	}
	for i, p := range clientParams {
		for _, re := range clientParamWords[i] {
			if !re.MatchString(e.Message) {
				continue
			}
			name := p.chat
			switch protocol {
			case "openai.responses":
				name = p.responses
			case "anthropic.messages":
				name = p.anthropic
			}
			msg := re.ReplaceAllString(e.Message, "${1}"+name+"${2}")
			return ClientRefusal{Status: e.Status, Code: e.Code, Param: name, Message: msg}, true
		}
	}
	return r, false
}
