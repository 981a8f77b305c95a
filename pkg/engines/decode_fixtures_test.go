package engines

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/internal/jsonfast"
	"github.com/searchfleet/searchfleet/pkg/llm"
)

// decodeTarget decodes a body into a fresh value of one engine's response type, with
// jsonfast (fast) or with encoding/json, and returns the value and the error.
type decodeTarget func(body []byte, fast bool) (any, error)

// target is the decodeTarget of type T.
func target[T any]() decodeTarget {
	return func(body []byte, fast bool) (any, error) {
		var v T
		var err error
		if fast {
			err = jsonfast.Unmarshal(body, &v)
		} else {
			err = json.Unmarshal(body, &v)
		}
		return v, err
	}
}

// TestDecodeMatchesEncodingJSONOnEveryFixture decodes every recorded fixture (every
// file of internal/fixtures, the superset of the shared recordings; error bodies and
// non-JSON files included) into every type the engines decode a provider body into,
// whole and cut in half, with jsonfast and with encoding/json, and wants the same value
// and the same error text: provider bodies must decode exactly as before, and the
// Decode message built from the error ("reading response: …") must keep its words.
func TestDecodeMatchesEncodingJSONOnEveryFixture(t *testing.T) {
	targets := map[string]decodeTarget{
		"brave":      target[braveResponse](),
		"exa":        target[exaResponse](),
		"glm-api":    target[glmAPIResponse](),
		"openrouter": target[openrouterResponse](),
		"perplexity": target[perplexityResponse](),
		"searxng":    target[searxngResponse](),
		"serper":     target[serperResponse](),
		"tavily":     target[tavilyResponse](),
		"chatAnswer": target[struct {
			Content json.RawMessage   `json:"content"`
			Native  *llm.NativeSearch `json:"searchfleet_native"`
		}](),
	}
	files, decoded := 0, 0
	err := fs.WalkDir(fixtures.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		body := fixtures.Read(name)
		for tname, decode := range targets {
			for _, b := range [][]byte{body, body[:len(body)/2]} {
				want, wantErr := decode(b, false)
				got, gotErr := decode(b, true)
				if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
					t.Errorf("%s (%d bytes) into %s: error %v, encoding/json says %v", name, len(b), tname, gotErr, wantErr)
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s (%d bytes) into %s: decoded\n%#v\nencoding/json decodes\n%#v", name, len(b), tname, got, want)
				}
				if wantErr == nil {
					decoded++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || decoded < 100 {
		t.Fatalf("only %d fixtures, %d decoded without error: the fixture tree is not being read", files, decoded)
	}
	t.Logf("%d fixtures, %d decodes compared without error", files, decoded)
}
