// Package jsonfast decodes JSON exactly as encoding/json's Unmarshal does, in one pass.
//
// encoding/json checks every document in a separate pass before it decodes it (its
// checkValid alone was ~11% of the fleet part of a fleetbench profile) and decodes
// through reflection with an allocation per step. The hot decode paths (provider
// bodies, bus messages, a client's Chat request at the ingress, the stored request,
// answer and turns) call Unmarshal here instead, which runs the v1 emulation of github.com/go-json-experiment/json, the
// prototype of encoding/json/v2 kept by the Go team: a single validating pass, about
// half the time and a third of the allocations on a provider body.
//
// The emulation is built to keep v1's semantics (field names matched without regard to
// case, invalid UTF-8 replaced by U+FFFD, duplicate names accepted with the last one
// winning, null leaving a value unchanged, UnmarshalJSON methods called), and the
// fixture test of pkg/engines proves it on every recorded provider body. Its errors are
// not encoding/json's, though: other types, other words. So when it fails, Unmarshal
// decodes again with encoding/json and returns that result, whatever it is. A caller
// therefore sees encoding/json's own *json.SyntaxError or *json.UnmarshalTypeError, in
// the same words (redact.JSONError and the engines' Decode messages depend on both),
// and in the rare case where the two disagree about a document, encoding/json decides.
// Before that second pass the value is put back as it was (a copy of *v, which is why
// Unmarshal is generic), so what encoding/json leaves in it on a type error is exactly
// what it would have left alone. Failures are rare on these paths, so the second pass
// costs nothing that matters.
//
// There is no Marshal here, on purpose. The emulation's Marshal is no faster than
// encoding/json's on what the fleet encodes (BenchmarkMarshal, three alternating runs
// on a loaded 2-core machine: a ten-hit search result 9.4-12.3 µs against 10.0-10.6
// µs, a bus event envelope 1.6-2.0 µs against 1.8-2.1 µs, with 41% more bytes
// allocated), and it does not give the same bytes: it writes a string's invalid UTF-8
// as a raw U+FFFD where encoding/json writes the escape \ufffd, which no option changes
// (TestEmulationMarshalDiffers); its errors differ too (an invalid RawMessage is
// "*json.RawMessage" in them). Everything else a table of tricky values (HTML
// characters, U+2028, floats, map keys of every kind, raw messages, methods, embedded
// and omitempty fields, nil slices and maps) and a fuzz run over valid strings, floats,
// maps and raw messages tried came out the same.
package jsonfast

import (
	"encoding/json"

	v1 "github.com/go-json-experiment/json/v1"
)

// Unmarshal parses the JSON document data into the value v points to, with the result
// and error encoding/json.Unmarshal would give. The copy that restores *v after a
// failed first pass is shallow: the result is exactly encoding/json's whenever *v
// starts with no maps, pointers or slices the first pass could write through, as every
// freshly declared value does (a value carrying defaults in plain fields is fine too).
func Unmarshal[T any](data []byte, v *T) error {
	if v == nil {
		return json.Unmarshal(data, v) // encoding/json's InvalidUnmarshalError
	}
	orig := *v
	if v1.Unmarshal(data, v) == nil {
		return nil
	}
	*v = orig
	return json.Unmarshal(data, v)
}
