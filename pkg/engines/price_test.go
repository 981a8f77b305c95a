package engines_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// staticToken is a TokenSource that always hands out the same token.
type staticToken string

func (s staticToken) Token(context.Context) (string, error) { return string(s), nil }
func (staticToken) Rejected(string)                         {}

// Every kind reserves what one search costs before it runs, whether it is built with
// one key, several keys or an access token, and a configured costPerSearchUSD is the
// price it reserves: a kind that reserved nothing would let concurrent searches run
// past a spend budget.
func TestEveryKindPricesASearch(t *testing.T) {
	for _, kind := range engines.Kinds() {
		base := engines.Config{ID: "e", Kind: kind, APIKey: "k"}
		switch kind {
		case "cloudflare":
			base.Options = json.RawMessage(`{"accountId":"acct"}`)
		case "searxng":
			base.BaseURL = "http://127.0.0.1:1"
		}
		override := 0.125
		builds := map[string]engines.Config{"one key": base}
		keys := base
		keys.APIKey, keys.APIKeys = "", []string{"k1", "k2"}
		builds["keys"] = keys
		tok := base
		tok.APIKey, tok.Token = "", staticToken("t")
		builds["token"] = tok
		priced := base
		priced.CostPerSearchUSD = &override
		builds["costPerSearchUSD"] = priced
		for how, c := range builds {
			reg, err := engines.FromConfig([]engines.Config{c}, nil)
			if err != nil {
				t.Fatalf("%s (%s): %v", kind, how, err)
			}
			e, _ := reg.Get("e")
			got := engines.PriceOf(e)
			switch {
			case how == "costPerSearchUSD" && got != override:
				t.Errorf("%s: costPerSearchUSD %v reserves %v", kind, override, got)
			case kind == "searxng" && how != "costPerSearchUSD" && got != 0:
				t.Errorf("searxng (self-hosted, free) reserves %v (%s)", got, how)
			case kind != "searxng" && got <= 0:
				t.Errorf("%s (%s) reserves %v for a search", kind, how, got)
			}
		}
	}
}
