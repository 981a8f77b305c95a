package engines

import (
	"context"
	"net/http"
	"sync"

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// TokenSource hands out OAuth access tokens, for engines that authenticate with one
// instead of an API key (seed 003: Gemini through Vertex AI, OpenAI). The config layer
// implements it (a token file, or a refresh command); the token is sent where the
// kind sends its key, so it suits kinds that send a bearer token (gemini with
// options.vertex, openai and the other bearer kinds). The main-model callers take
// the same sources (provider.TokenSource).
type TokenSource = provider.TokenSource

// tokened runs an engine with the current token of a TokenSource: the kind's engine
// is built again (a cheap value) whenever the token changes, and a search refused for
// its token is retried once with a fresh one.
type tokened struct {
	id    string
	make  func(token string) (Engine, error)
	src   TokenSource
	caps  Capabilities
	price float64 // the kind's, which no token changes

	mu  sync.Mutex
	tok string
	eng Engine
}

func newTokened(f factory, c Config, hc *http.Client) (*tokened, error) {
	t := &tokened{id: c.ID, src: c.Token}
	t.make = func(tok string) (Engine, error) {
		ck := c
		ck.APIKey, ck.APIKeys, ck.Token = tok, nil, nil
		return f(ck, hc)
	}
	e, err := t.make("") // checks the configuration before the first search
	if err != nil {
		return nil, err
	}
	t.caps, t.price = capsOf(e), PriceOf(e)
	return t, nil
}

func (t *tokened) Name() string { return t.id }

func (t *tokened) Capabilities() Capabilities { return t.caps }

// engine returns the kind's engine built with tok.
func (t *tokened) engine(tok string) (Engine, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.eng == nil || tok != t.tok {
		e, err := t.make(tok)
		if err != nil {
			return nil, err
		}
		t.tok, t.eng = tok, e
	}
	return t.eng, nil
}

func (t *tokened) Search(ctx context.Context, q Query) (*Result, error) {
	for attempt := 0; ; attempt++ {
		tok, err := t.src.Token(ctx)
		if err != nil {
			return nil, &Error{Kind: Auth, Engine: t.id, Message: "no access token: " + provider.Redact(err.Error(), tok)}
		}
		eng, err := t.engine(tok)
		if err != nil {
			return nil, err
		}
		res, err := eng.Search(ctx, q)
		if err == nil {
			return res, nil
		}
		if e := AsError(t.id, err); e.Kind == Auth && attempt == 0 {
			t.src.Rejected(tok)
			continue
		}
		return nil, err
	}
}
