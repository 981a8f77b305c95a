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

// Every kind prices its searches in its client (see client.price).
func (c *client) PricePerSearch() float64 { return c.price }

func (n *normalized) PricePerSearch() float64 { return PriceOf(n.inner) }

// An engine run with access tokens costs what it does with a key.
func (t *tokened) PricePerSearch() float64 { return t.price }

// An engine with several keys costs what each of them does.
func (k *keyed) PricePerSearch() float64 { return PriceOf(k.per[0]) }
