package redisstore

import (
	"strconv"
	"strings"
)

// keyspace builds every key and channel name the store uses. The hash tag ({…}) decides the
// Redis Cluster slot: all keys of one deployment share {d:<id>} so one script can touch them
// atomically; a failure domain's capacity circuit has its own {fd:<domain>}; the
// configuration lives under {cfg} so a MULTI or script can write it and bump the version
// together.
//
// docs/redis.md lists every key with its type and TTL; keep the two in step.
type keyspace struct {
	prefix string // e.g. "sy:"; never contains a brace (it would move the hash tag)
}

func (k keyspace) circuit(dep string) string  { return k.prefix + "{d:" + dep + "}:circuit" }
func (k keyspace) inflight(dep string) string { return k.prefix + "{d:" + dep + "}:inflight" }
func (k keyspace) stats(dep string) string    { return k.prefix + "{d:" + dep + "}:stats" }

// counted marks that request already counted a transient failure on dep (SPEC §5.3).
func (k keyspace) counted(dep, request string) string {
	return k.prefix + "{d:" + dep + "}:counted:" + request
}

func (k keyspace) capacity(domain string) string { return k.prefix + "{fd:" + domain + "}:capacity" }

func (k keyspace) configVersion() string     { return k.prefix + "{cfg}:version" }
func (k keyspace) configSettings() string    { return k.prefix + "{cfg}:settings" }
func (k keyspace) configDeployments() string { return k.prefix + "{cfg}:deployments" }
func (k keyspace) configSecrets() string     { return k.prefix + "{cfg}:secrets" }
func (k keyspace) configChains() string      { return k.prefix + "{cfg}:chains" }
func (k keyspace) configPolicies() string    { return k.prefix + "{cfg}:policies" }

// configChannel is the pub/sub channel that carries new config versions. It is a plain
// (not sharded) channel: PUBLISH reaches subscribers on every node of a cluster.
func (k keyspace) configChannel() string { return k.prefix + "{cfg}:changed" }

// chainField is the hash field of a fallback chain. The length prefix keeps (model, reason)
// pairs unambiguous whatever characters a model name holds.
func chainField(publicModel, reason string) string {
	return strconv.Itoa(len(publicModel)) + ":" + publicModel + ":" + reason
}

// validPrefix reports whether p can prefix keys without breaking hash tags.
func validPrefix(p string) bool { return !strings.ContainsAny(p, "{}") }
