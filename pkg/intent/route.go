package intent

import (
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// ChoiceOptions is how a call's engine was chosen when the fleet's first choice would
// have weakened an option of the search: + the options ("options:recency,country").
const ChoiceOptions = "options:"

// Route is c with its engine chosen again when the choice was the fleet's (not the
// model's, not the request's) and that engine would weaken or drop an option the
// search carries (engines.Unmet): the first engine offered, in configuration order,
// that speaks the query's language (Languages) and meets every option the search
// carries. c is unchanged when the engine meets them, or none does (the search then
// warns, or is refused when strict, naming the engine and the option).
func (t *Toolset) Route(c Call, googlePreferred bool) Call {
	if c.Choice == ChoiceModel || c.Choice == "request" {
		return c
	}
	v := t.view(googlePreferred)
	unmet := func(e Engine) []engines.Option {
		if e.Honours == nil {
			return nil // unknown: taken as it is
		}
		return engines.Unmet(*e.Honours, c.Query)
	}
	i := slices.IndexFunc(v.engines, func(e Engine) bool { return e.ID == c.Engine })
	if i < 0 {
		return c
	}
	missed := unmet(v.engines[i])
	if len(missed) == 0 {
		return c
	}
	lang := QueryLanguage(c.Query.Query)
	for _, e := range v.engines {
		if e.Honours != nil && e.speaks(lang) && len(unmet(e)) == 0 {
			names := make([]string, len(missed))
			for j, o := range missed {
				names[j] = string(o)
			}
			c.Engine, c.Choice = e.ID, ChoiceOptions+strings.Join(names, ",")
			return c
		}
	}
	return c
}
