package state

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The store's Lua scripts, one file per script in lua/, each named after what it
// does, with its KEYS and ARGV named at its top. Redis runs a script as one text
// and cannot call another, so a function two scripts call is a file of its own in
// lua/fn/ (its local functions only), and a script that calls it says so in its
// header ("-- uses fn/claim.lua"): script puts the file before it. Nothing else
// joins or rewrites a script.
//
//go:embed lua/*.lua lua/fn/*.lua
var luaFiles embed.FS

// script returns the embedded script lua/<name>.lua, after the functions it uses.
func script(name string) *redis.Script {
	return redis.NewScript(scriptSource("lua/" + name + ".lua"))
}

// scriptSource is the text of the script at path, after the files its header's
// "-- uses" lines name.
func scriptSource(path string) string {
	b, err := luaFiles.ReadFile(path)
	if err != nil {
		panic("state: no script " + path)
	}
	var src strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		if f, ok := strings.CutPrefix(line, "-- uses "); ok {
			src.WriteString(scriptSource("lua/" + f))
		}
	}
	src.Write(b)
	src.WriteByte('\n')
	return src.String()
}
