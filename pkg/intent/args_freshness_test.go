package intent

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// max_age, cache and strict reach the query; bad values are refused by name.
func TestParseFreshness(t *testing.T) {
	t.Parallel()
	one := mustToolset(t, oneEngine)
	c, err := one.Parse(`{"query":"x","max_age":0,"cache":"only","strict":true}`, false)
	if err != nil {
		t.Fatal(err)
	}
	if q := c.Query; q.MaxAge == nil || *q.MaxAge != 0 || q.Cache != engines.CacheOnly || !q.Strict {
		t.Errorf("query = %+v", q)
	}
	c, err = one.Parse(`{"query":"x","max_age":3600}`, false)
	if err != nil || c.Query.MaxAge == nil || *c.Query.MaxAge != 3600 || c.Query.Cache != "" || c.Query.Strict {
		t.Errorf("max_age 3600: %+v, %v", c.Query, err)
	}
	for args, want := range map[string]string{
		`{"query":"x","max_age":-1}`:    "'max_age'",
		`{"query":"x","max_age":"60"}`:  "'max_age'",
		`{"query":"x","max_age":1.5}`:   "'max_age'",
		`{"query":"x","cache":"never"}`: "'cache'",
		`{"query":"x","strict":"yes"}`:  "'strict'",
	} {
		if _, err := one.Parse(args, false); err == nil || !strings.Contains(err.Details, want) {
			t.Errorf("%s: %v, want an error naming %s", args, err, want)
		}
	}
}
