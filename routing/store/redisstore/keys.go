package redisstore

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// state is a deployment's state record: circuit, metrics and in-flight summary packed in one
// string (lua/common.lua), so a routing read is one bulk reply per deployment.
func (k keyspace) state(dep string) string { return k.prefix + "{d:" + dep + "}:state" }

// inflight is the sorted set of a deployment's attempts in flight, the source of truth the
// state record's in-flight summary is computed from.
func (k keyspace) inflight(dep string) string { return k.prefix + "{d:" + dep + "}:inflight" }

// counted marks that request already counted a transient failure on dep (behaviour §5.3).
func (k keyspace) counted(dep, request string) string {
	return k.prefix + "{d:" + dep + "}:counted:" + request
}

// capacity is a failure domain's capacity circuit, a string "until|quota".
func (k keyspace) capacity(domain string) string { return k.prefix + "{fd:" + domain + "}:cap" }

func (k keyspace) configVersion() string     { return k.prefix + "{cfg}:version" }
func (k keyspace) configSettings() string    { return k.prefix + "{cfg}:settings" }
func (k keyspace) configDeployments() string { return k.prefix + "{cfg}:deployments" }
func (k keyspace) configSecrets() string     { return k.prefix + "{cfg}:secrets" }
func (k keyspace) configChains() string      { return k.prefix + "{cfg}:chains" }
func (k keyspace) configPolicies() string    { return k.prefix + "{cfg}:policies" }

// clientKeys is the hash of client API keys (id → record, clientkeys.go): durable like the
// configuration, hence under {cfg}, though not versioned with it.
func (k keyspace) clientKeys() string { return k.prefix + "{cfg}:clientkeys" }

// revokedChannel carries the id of every client key deleted (WatchRevocations), so replicas
// that cache verified keys drop it at once. Plain, like configChannel.
func (k keyspace) revokedChannel() string { return k.prefix + "{cfg}:clientkeys:revoked" }

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

// maxCachedKeys bounds a keyCache. Deployment ids and failure domains come from the
// configuration, so a fleet's working set is far below it; past it keys are built per call.
const maxCachedKeys = 4096

// keyCache memoises a key per deployment id or failure domain, boxed as the `any` a command
// argument is, so the routing read path builds and boxes no strings. Reads are lock-free
// (sync.Map suits a set written once per id and then only read).
type keyCache struct {
	build func(string) string
	m     sync.Map // id → key (string in an any)
	n     atomic.Int32
}

func (c *keyCache) get(id string) any {
	if k, ok := c.m.Load(id); ok {
		return k
	}
	k := any(c.build(id))
	if c.n.Load() < maxCachedKeys {
		if _, loaded := c.m.LoadOrStore(id, k); !loaded {
			c.n.Add(1)
		}
	}
	return k
}
