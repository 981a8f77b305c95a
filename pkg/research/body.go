package research

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Body is a research request as a client writes it: the body of POST /v1/research
// and of a batch line whose url is "/v1/research".
type Body struct {
	Input        json.RawMessage   `json:"input"`
	Model        string            `json:"model"`
	Agent        string            `json:"agent"`
	Effort       string            `json:"effort"`
	Instructions string            `json:"instructions"`
	OutputSchema json.RawMessage   `json:"output_schema"`
	Plan         string            `json:"plan"`
	Budget       Budget            `json:"budget"`
	Callback     json.RawMessage   `json:"callback"`
	Metadata     map[string]string `json:"metadata"`
	// Share false opts out of sharing an identical run in flight.
	Share *bool `json:"share"`
}

// Request is the body as a run's request made by surface (the callback is the
// caller's to validate). Its error is the client's to fix.
func (b *Body) Request(surface string) (*Request, error) {
	input, err := InputText(b.Input)
	if err != nil {
		return nil, err
	}
	return &Request{Input: input, Model: b.Model, Agent: b.Agent, Effort: b.Effort, Instructions: b.Instructions, OutputSchema: b.OutputSchema,
		Plan: b.Plan, Budget: b.Budget, Metadata: b.Metadata, Surface: surface}, nil
}

// InputText is a run's input as text: the question, or messages ({role, content})
// whose text is joined with the last message last.
func InputText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return "", errors.New("input: a string, or an array of messages")
	}
	var b strings.Builder
	for i, m := range msgs {
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				text += p.Text
			}
		}
		if i == len(msgs)-1 {
			b.WriteString(text)
		} else {
			fmt.Fprintf(&b, "%s: %s\n\n", m.Role, text)
		}
	}
	return b.String(), nil
}
