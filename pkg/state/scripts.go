package state

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// The store's Lua scripts, one file per script in lua/, each named after what it
// does, with its KEYS and ARGV named at its top.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// script returns the embedded script lua/<name>.lua.
func script(name string) *redis.Script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("state: no script " + name)
	}
	return redis.NewScript(string(src))
}
