package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// redisLogger passes go-redis's own log lines (printf-style: failed sentinels, cluster
// reloads, pool errors) to slog, so they come out as structured records in the JSON stream
// instead of go-redis's plain "redis: …" lines on stderr.
//
// go-redis keeps its logger in a process-global (redis.SetLogger); only the binary sets it,
// once per run, never library code: a library that set it would steal the logs of every other
// go-redis user in the process.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	// go-redis logs what went wrong or changed (its level filter drops the rest): warn.
	l.log.LogAttrs(ctx, slog.LevelWarn, strings.TrimSpace(fmt.Sprintf(format, v...)), slog.String("component", "go-redis"))
}
