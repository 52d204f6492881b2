package redisstore

import (
	"context"
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scripts are the Lua programs of the store, compiled once per Store. Each is the shared
// prelude followed by its body, so a script is self-contained on the server (Redis caches
// scripts by SHA1, and EVALSHA cannot include another script).
type scripts struct {
	start, finish, probe, capacity, release *luaScript
	reserve, unreserve                      *luaScript
	configReplace, configRestore            *luaScript
}

// luaScript keeps the source beside the go-redis Script, for the EVAL fallback in pipelines.
type luaScript struct {
	*redis.Script
	src string
}

func newScript(src string) *luaScript { return &luaScript{Script: redis.NewScript(src), src: src} }

func loadScripts() (scripts, error) {
	var err error
	read := func(name string) string {
		if err != nil {
			return ""
		}
		var b []byte
		b, err = luaFS.ReadFile("lua/" + name)
		return string(b)
	}
	common, configCommon := read("common.lua"), read("config_common.lua")
	s := scripts{
		start:         newScript(common + read("start.lua")),
		finish:        newScript(common + read("finish.lua")),
		probe:         newScript(common + read("probe.lua")),
		capacity:      newScript(common + read("capacity.lua")),
		release:       newScript(common + read("release.lua")),
		reserve:       newScript(common + read("reserve.lua")),
		unreserve:     newScript(common + read("unreserve.lua")),
		configReplace: newScript(configCommon + read("config_replace.lua")),
		configRestore: newScript(configCommon + read("config_restore.lua")),
	}
	if err != nil {
		return scripts{}, fmt.Errorf("redisstore: load Lua scripts: %w", err)
	}
	return s, nil
}

// scriptCall is one script invocation of a pipeline.
type scriptCall struct {
	script *luaScript
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// runScripts runs calls in one pipeline (one round trip per node) with EVALSHA. Calls the
// server answers with NOSCRIPT (its script cache was flushed or it is a new node) run again
// with EVAL, which also caches them. Only those calls are repeated: each call is its own
// atomic script, and the others already ran.
func runScripts(ctx context.Context, rdb redis.UniversalClient, calls []scriptCall) error {
	if len(calls) == 1 {
		c := &calls[0]
		c.cmd = c.script.Run(ctx, rdb, c.keys, c.args...)
		return c.cmd.Err()
	}
	pipe := rdb.Pipeline()
	for i := range calls {
		c := &calls[i]
		c.cmd = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below
	var retry redis.Pipeliner
	for i := range calls {
		c := &calls[i]
		if !isNoScript(c.cmd.Err()) {
			continue
		}
		if retry == nil {
			retry = rdb.Pipeline()
		}
		c.cmd = retry.Eval(ctx, c.script.src, c.keys, c.args...)
	}
	if retry != nil {
		_, _ = retry.Exec(ctx)
	}
	for i := range calls {
		if err := calls[i].cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
