package engines

// Priced is an engine that knows what one search costs before it runs: its configured
// costPerSearchUSD or its kind's list price. A spend budget reserves this much before
// the call and settles to the result's Usage.CostUSD after it.
type Priced interface {
	// PricePerSearch is the expected USD cost of one call.
	PricePerSearch() float64
}

// PriceOf returns what one search of e is expected to cost (0 when e does not say).
func PriceOf(e Engine) float64 {
	if p, ok := e.(Priced); ok {
		return p.PricePerSearch()
	}
	return 0
}

func (n *normalized) PricePerSearch() float64 { return PriceOf(n.inner) }

func (g *grounded) PricePerSearch() float64         { return g.price }
func (c *chatGrounded) PricePerSearch() float64     { return c.price }
func (e *brave) PricePerSearch() float64            { return e.price }
func (e *exa) PricePerSearch() float64              { return e.price }
func (e *glmAPI) PricePerSearch() float64           { return e.price }
func (e *perplexitySearch) PricePerSearch() float64 { return e.price }
func (e *openRouter) PricePerSearch() float64       { return e.price }
func (e *searxng) PricePerSearch() float64          { return e.price }
func (e *tavily) PricePerSearch() float64           { return e.price }

// One web_search call; the tokens and further calls are settled after the call.
func (e *perplexity) PricePerSearch() float64 { return e.fee }

// One credit; a search that takes more is settled after the call.
func (e *serper) PricePerSearch() float64 { return e.creditPrice }

// An engine with several keys costs what each of them does.
func (k *keyed) PricePerSearch() float64 { return PriceOf(k.per[0]) }
