// Package redisstore owns switchyard's Redis-backed store.Store: the shared routing state of
// many gateway replicas (circuits, failure-domain capacity, in-flight attempts and metrics,
// behaviour §3–§5) and the persisted configuration with its change notifications (behaviour §11.2).
//
// It also owns Resilient, the wrapper that keeps routing on process-local state while Redis
// is unreachable and returns to Redis when it answers again.
//
// Design rules, all of them visible in docs/redis.md:
//   - Every atomic transition is a Lua script (EVALSHA with an EVAL fallback on NOSCRIPT)
//     that implements exactly the reference functions of package store.
//   - One deployment's keys share a hash tag, so a deployment's script touches one slot; a
//     failure domain's capacity circuit lives on its own slot and is updated by a separate
//     script sent in the same pipeline.
//   - The store never reads a clock: all state is computed from stored timestamps and the
//     caller's `now`. Key TTLs are only garbage collection and are always relative durations.
//   - Times and durations are stored as integer microseconds, exact in a Lua double.
package redisstore
