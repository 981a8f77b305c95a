package batch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// CreateFrom starts a batch from the JSON body of POST /v1/batches, read as a stream:
// the simple form's questions are validated and written to the batch's input file as
// they are read, so a large body is never held whole. (The questions are streamed
// when "model" comes before "queries", or the fleet serves one model and the body
// names none before them; otherwise they are kept until the model is read.) A body
// over its reader's limit (http.MaxBytesReader) is TooLarge.
func (s *Service) CreateFrom(ctx context.Context, tenant string, body io.Reader) (View, error) {
	p, err := s.decodeCreate(ctx, tenant, body)
	if err != nil {
		return View{}, err
	}
	return s.Create(ctx, tenant, p)
}

// decodeCreate reads a create body, streaming its questions into an input file when
// it can.
func (s *Service) decodeCreate(ctx context.Context, tenant string, body io.Reader) (_ *CreateParams, err error) {
	p := &CreateParams{}
	defer func() {
		if err != nil && p.streamed != nil {
			p.streamed.abort()
		}
	}()
	dec := json.NewDecoder(body)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, bodyError(err, "The body must be a JSON object.")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bodyError(err, "")
		}
		key, _ := tok.(string)
		if key != "queries" {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, bodyError(err, "")
			}
			fields[key] = raw
			continue
		}
		if p.Queries != nil || p.streamed != nil {
			return nil, invalid("", "queries", "queries is given twice")
		}
		if err := s.decodeQueries(ctx, tenant, dec, fields, p); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, bodyError(err, "")
	}
	rest, _ := json.Marshal(fields)
	if err := json.Unmarshal(rest, p); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return nil, invalid("", te.Field, "%s has the wrong type (%s)", te.Field, te.Value)
		}
		return nil, invalid("", "", "The body must be a JSON object: %s", redact.JSONError(err))
	}
	return p, nil
}

// decodeQueries reads the queries array: into an input file as it is read when the
// model is known, else into p.Queries.
func (s *Service) decodeQueries(ctx context.Context, tenant string, dec *json.Decoder, fields map[string]json.RawMessage, p *CreateParams) error {
	tok, err := dec.Token()
	if err != nil {
		return bodyError(err, "")
	}
	if tok == nil {
		return nil // "queries": null is no queries
	}
	if tok != json.Delim('[') {
		return invalid("", "queries", "queries must be an array of strings")
	}
	var model, endpoint string
	json.Unmarshal(fields["endpoint"], &endpoint)
	endpoint = cmp.Or(endpoint, chatEndpoint)
	if raw, ok := fields["model"]; ok {
		json.Unmarshal(raw, &model)
	} else {
		model = s.queryModel(endpoint)
	}
	if model != "" && (endpoint == chatEndpoint || endpoint == researchEndpoint) {
		if p.streamed, err = s.newQueryInput(ctx, tenant, endpoint, model, fields["research"]); err != nil {
			return err
		}
	} else {
		p.Queries = []string{}
	}
	for i := 0; dec.More(); i++ {
		var q string
		if err := dec.Decode(&q); err != nil {
			if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
				return invalid("", fmt.Sprintf("queries[%d]", i), "queries[%d] must be a string", i)
			}
			return bodyError(err, "")
		}
		if p.streamed != nil {
			p.streamed.add(q)
		} else {
			p.Queries = append(p.Queries, q)
		}
	}
	if _, err := dec.Token(); err != nil {
		return bodyError(err, "")
	}
	if _, named := fields["model"]; p.streamed != nil && !named {
		// The one model served, unless the body names another after the queries.
		p.Model = model
	}
	return nil
}

// bodyError words a failure to read a create body: TooLarge over its limit, else
// invalid JSON (msg, when set, replaces the decoder's words).
func bodyError(err error, msg string) error {
	if tooBig, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &Error{Kind: TooLarge, Code: "request_too_large", Message: fmt.Sprintf("The request body exceeds the limit of %d bytes; upload large inputs with POST /v1/files.", tooBig.Limit)}
	}
	if msg != "" {
		return invalid("", "", "%s", msg)
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("", "", "The body ends before the JSON object does.")
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		return invalid("", "", "The body is not valid JSON: %s", redact.JSONError(err))
	}
	return invalid("", "", "Could not read the request body.")
}
