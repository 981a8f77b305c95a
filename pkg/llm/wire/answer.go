package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// AnswerFormat is the format version of a completed job's stored answer: the
// canonical Response (EncodeAnswer), rendered in the client's protocol when it is
// read.
const AnswerFormat = 2

type storedAnswer struct {
	Format   int       `json:"format"`
	Response *Response `json:"response"`
}

// EncodeAnswer is a completed job's answer as the job record stores it.
func EncodeAnswer(r *Response) (json.RawMessage, error) {
	return marshalStored(&storedAnswer{Format: AnswerFormat, Response: r})
}

// marshalStored encodes v as a job record stores it: HTML characters as they are.
func marshalStored(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeAnswer reads a job's stored answer.
func DecodeAnswer(b []byte) (*Response, error) {
	var a storedAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("stored answer unreadable: %w", err)
	}
	if a.Format != AnswerFormat {
		return nil, fmt.Errorf("stored answer of unknown format %d", a.Format)
	}
	if a.Response == nil {
		return nil, fmt.Errorf("stored answer of format %d has no response", a.Format)
	}
	return a.Response, nil
}

// FormatOf is the format of a stored answer (0: none, as for a direct search's result).
func FormatOf(b []byte) (int, error) {
	var head struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return 0, fmt.Errorf("stored answer unreadable: %w", err)
	}
	return head.Format, nil
}
