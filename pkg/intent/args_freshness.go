package intent

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// parseFreshness reads the search's max_age (seconds a cached result may be old, 0: a
// fresh search), cache ("only": no paid search) and strict (refuse an option the
// engine cannot honour) into q.
func parseFreshness(q *engines.Query, fields map[string]json.RawMessage) *ArgError {
	if raw := fields["max_age"]; !absent(raw) {
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || raw[0] == '"' || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
			return argsError("web_search got an invalid 'max_age'.", "'max_age' must be a whole number of seconds, 0 or more, not "+clip(string(raw), 20)+".")
		}
		n := int(f)
		q.MaxAge = &n
	}
	if raw := fields["cache"]; !absent(raw) {
		var v string
		if json.Unmarshal(raw, &v) != nil || v != engines.CacheOnly {
			return argsError("web_search got an invalid 'cache'.", `'cache' must be "only" (answer from the cache, or say nothing is cached), not `+clip(string(raw), 20)+".")
		}
		q.Cache = v
	}
	if raw := fields["strict"]; !absent(raw) {
		if json.Unmarshal(raw, &q.Strict) != nil {
			return argsError("web_search got an invalid 'strict'.", "'strict' must be true or false, not "+clip(string(raw), 20)+".")
		}
	}
	return nil
}
