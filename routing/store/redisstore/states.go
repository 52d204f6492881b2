package redisstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// ReadStates implements store.States: every candidate's circuit, in-flight count and metrics
// and every distinct failure domain's capacity circuit, read fresh in one pipeline. On a
// standalone or Sentinel client that is one round trip; a Cluster client splits the
// pipeline by node and sends the parts concurrently, one round trip per node in parallel.
//
// Plain reads suffice (no script): each key is read atomically, and the per-deployment
// invariants hold inside each key; derived values (in-flight count, current minute, health
// window, half-open) are computed from stored timestamps and now.
func (s *Store) ReadStates(ctx context.Context, now time.Time, refs []store.DeploymentRef, out []store.DeploymentState) error {
	if len(refs) == 0 {
		return nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	nowUS := micros(now)
	aboveNow := "(" + strconv.FormatInt(nowUS, 10)

	type depCmds struct {
		circuit, stats *redis.MapStringStringCmd
		inflight       *redis.IntCmd
		domain         int // index into domains
	}
	cmds := make([]depCmds, len(refs))
	// Candidates of one group often share a failure domain: read each domain once. Groups
	// are small, so a linear scan beats a map.
	domains := make([]string, 0, len(refs))
	pipe := s.rdb.Pipeline()
	for i, ref := range refs {
		c := &cmds[i]
		c.circuit = pipe.HGetAll(ctx, s.keys.circuit(ref.ID))
		c.inflight = pipe.ZCount(ctx, s.keys.inflight(ref.ID), aboveNow, "+inf")
		c.stats = pipe.HGetAll(ctx, s.keys.stats(ref.ID))
		c.domain = -1
		for j, d := range domains {
			if d == ref.Domain {
				c.domain = j
				break
			}
		}
		if c.domain < 0 {
			c.domain = len(domains)
			domains = append(domains, ref.Domain)
		}
	}
	capCmds := make([]*redis.MapStringStringCmd, len(domains))
	for j, d := range domains {
		capCmds[j] = pipe.HGetAll(ctx, s.keys.capacity(d))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable("read states", err)
	}

	minute := store.MinuteOf(now)
	capacities := make([]store.Capacity, len(domains))
	for j, c := range capCmds {
		capacities[j] = parseCapacity(c.Val())
	}
	for i := range refs {
		c := &cmds[i]
		out[i] = store.DeploymentState{
			Circuit:  parseCircuit(c.circuit.Val()),
			Capacity: capacities[c.domain],
			Metrics:  parseMetrics(c.stats.Val(), minute),
		}
		out[i].Metrics.InFlight = c.inflight.Val()
	}
	return nil
}

// parseCircuit reads a circuit hash written by save_circuit (lua/common.lua).
func parseCircuit(h map[string]string) store.Circuit {
	if len(h) == 0 {
		return store.Circuit{}
	}
	return store.Circuit{
		Open:        h["open"] == "1",
		Cause:       store.OpenCause(atoi(h["cause"])),
		Failures:    uint32(atoi(h["fails"])),
		WindowStart: fromMicros(atoi(h["ws"])),
		OpenedAt:    fromMicros(atoi(h["oa"])),
		OpenUntil:   fromMicros(atoi(h["ou"])),
		Reopens:     uint32(atoi(h["reo"])),
		ProbeOwner:  h["po"],
		ProbeUntil:  fromMicros(atoi(h["pu"])),
	}
}

// parseCapacity reads a capacity hash written by lua/capacity.lua.
func parseCapacity(h map[string]string) store.Capacity {
	if len(h) == 0 {
		return store.Capacity{}
	}
	return store.Capacity{Until: fromMicros(atoi(h["until"])), Quota: h["quota"] == "1"}
}

// parseMetrics reads a stats hash: minute counters count only in their own minute, health
// buckets only inside the window ending at minute (the semantics of memstore). One pass over
// the hash, without allocating.
func parseMetrics(h map[string]string, minute int64) store.Metrics {
	var m store.Metrics
	if len(h) == 0 {
		return m
	}
	var rpmMinute, rpm, tpm int64
	for k, v := range h {
		switch k {
		case "m":
			rpmMinute = atoi(v)
		case "rpm":
			rpm = atoi(v)
		case "tpm":
			tpm = atoi(v)
		case "lat":
			m.LatencyEWMA, m.HasLatency = atof(v), true
		case "tp":
			m.ThroughputEWMA, m.HasThroughput = atof(v), true
		default:
			// Health buckets h0..h9: "minute:successes:failures".
			if len(k) != 2 || k[0] != 'h' {
				continue
			}
			bm, rest, _ := strings.Cut(v, ":")
			hs, hf, _ := strings.Cut(rest, ":")
			if b := atoi(bm); b > minute-healthBuckets && b <= minute {
				m.Successes += atoi(hs)
				m.Failures += atoi(hf)
			}
		}
	}
	if rpmMinute == minute {
		m.RPM, m.TPM = rpm, tpm
	}
	return m
}

// healthBuckets is the number of one-minute buckets of the health window (SPEC §3.5).
const healthBuckets = int64(store.HealthWindow / time.Minute)

// micros is t in Unix microseconds, the unit of every stored timestamp; the zero time is 0.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// durMicros is d in whole microseconds, rounded up so a positive duration never becomes 0.
func durMicros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// atoi parses a stored integer; a missing or malformed field reads as 0 like an absent one.
func atoi(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func atof(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return f
}
