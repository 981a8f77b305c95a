package state_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Every script, with the functions its header says it uses put before it, is one
// text Redis compiles, and it says it uses exactly the lua/fn/ files whose functions
// it calls: a script that calls a shared function without naming its file, or names
// one it does not call, fails here rather than when Redis runs it.
func TestScriptsUseTheFunctionsTheyName(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	defines := map[string][]string{} // lua/fn file → the functions it defines
	fns, err := filepath.Glob("lua/fn/*.lua")
	if err != nil || len(fns) == 0 {
		t.Fatalf("no shared functions: %v", err)
	}
	def := regexp.MustCompile(`(?m)^local function (\w+)\(`)
	for _, f := range fns {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			defines[strings.TrimPrefix(f, "lua/")] = append(defines[strings.TrimPrefix(f, "lua/")], m[1])
		}
	}
	scripts, _ := filepath.Glob("lua/*.lua")
	used := map[string]bool{}
	for _, path := range scripts {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, line := range strings.Split(string(b), "\n") {
			if f, ok := strings.CutPrefix(line, "-- uses "); ok {
				names = append(names, f)
			}
		}
		for f, funcs := range defines {
			calls := slices.ContainsFunc(funcs, func(fn string) bool {
				return regexp.MustCompile(`[^\w.]` + fn + `\(`).Match(b)
			})
			if calls != slices.Contains(names, f) {
				t.Errorf("%s: calls a function of %s: %v, names it: %v", path, f, calls, !calls)
			}
			used[f] = used[f] || calls
		}
		src := state.ScriptSource(path)
		if !strings.HasSuffix(src, string(b)+"\n") {
			t.Errorf("%s: the script is not the end of what the store loads", path)
		}
		if err := rdb.ScriptLoad(context.Background(), src).Err(); err != nil {
			t.Errorf("%s: Redis does not load it: %v", path, err)
		}
	}
	for f := range defines {
		if !used[f] {
			t.Errorf("%s: no script uses it", f)
		}
	}
}
