package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// StartAttempt implements store.Attempts with lua/start.lua: one round trip.
func (s *Store) StartAttempt(ctx context.Context, a store.AttemptStart) error {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	err := s.scripts.start.Run(ctx, s.rdb,
		[]string{s.keys.inflight(a.DeploymentID), s.keys.state(a.DeploymentID)},
		a.AttemptID, micros(a.Now), micros(a.Expires), store.MinuteOf(a.Now),
		stateTTL.Milliseconds(), durMicros(inflightGrace), boolArg(a.Reserved),
	).Err()
	if err != nil {
		return unavailable("start attempt", err)
	}
	return nil
}

// Reserve implements store.Attempts with lua/reserve.lua: one round trip.
func (s *Store) Reserve(ctx context.Context, r store.Reservation) (bool, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	n, err := s.scripts.reserve.Run(ctx, s.rdb, []string{s.keys.state(r.DeploymentID)},
		store.MinuteOf(r.Now), r.RPMLimit, r.TPMLimit, max(r.Tokens, 0), stateTTL.Milliseconds()).Int64()
	if err != nil {
		return false, unavailable("reserve", err)
	}
	return n == 1, nil
}

// Unreserve implements store.Attempts with lua/unreserve.lua.
func (s *Store) Unreserve(ctx context.Context, r store.Reservation) error {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	err := s.scripts.unreserve.Run(ctx, s.rdb, []string{s.keys.state(r.DeploymentID)},
		store.MinuteOf(r.Now), max(r.Tokens, 0), stateTTL.Milliseconds()).Err()
	if err != nil {
		return unavailable("unreserve", err)
	}
	return nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// FinishAttempt implements store.Attempts: lua/finish.lua on the deployment's slot and, for
// a throttle or an exhausted quota, lua/capacity.lua on the failure domain's slot, both in
// one pipeline (one round trip; on a Cluster one per node, in parallel).
func (s *Store) FinishAttempt(ctx context.Context, f store.AttemptFinish) (store.Transition, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()

	latency, throughput := "", ""
	if f.Effect == store.EffectSuccess {
		latency = formatFloat(f.Latency.Seconds())
		if tp, ok := store.Throughput(f.CompletionTokens, f.Latency); ok {
			throughput = formatFloat(tp)
		}
	}
	dedupe := f.DedupeTTL
	if dedupe <= 0 {
		dedupe = store.DefaultDedupeTTL
	}
	cs := f.Settings
	calls := make([]scriptCall, 1, 2)
	calls[0] = scriptCall{
		script: s.scripts.finish,
		keys: []string{
			s.keys.state(f.DeploymentID), s.keys.inflight(f.DeploymentID),
			s.keys.counted(f.DeploymentID, f.RequestID),
		},
		args: []any{
			f.AttemptID, f.RequestID, micros(f.Now), int(f.Effect),
			cs.AllowedFails, durMicros(cs.Cooldown), durMicros(cs.FailureWindow),
			durMicros(cs.MaxCooldown), durMicros(cs.ConfigurationCooldown),
			formatFloat(store.ClampJitter(f.Jitter)), latency, throughput, max(f.TotalTokens, 0),
			durMicros(dedupe), store.MinuteOf(f.Now),
			durMicros(circuitGrace), stateTTL.Milliseconds(), durMicros(dedupeGrace),
			micros(f.Started), store.HealthBuckets,
			max(f.Reserved.Tokens, 0), store.MinuteOf(f.Reserved.At),
		},
	}
	if f.Effect == store.EffectThrottle || f.Effect == store.EffectQuota {
		d, quota := store.CapacityCooldown(f.Effect, cs, f.RetryAfter), "0"
		if f.Effect == store.EffectQuota {
			quota = "1"
		}
		calls = append(calls, scriptCall{
			script: s.scripts.capacity,
			keys:   []string{s.keys.capacity(f.Domain)},
			args:   []any{micros(f.Now), durMicros(d), quota, durMicros(capacityGrace)},
		})
	}
	if err := runScripts(ctx, s.rdb, calls); err != nil {
		return store.Transition{}, unavailable("finish attempt", err)
	}

	var t store.Transition
	reply, err := calls[0].cmd.Slice()
	if err != nil || len(reply) != 11 {
		return t, fmt.Errorf("redisstore: finish attempt: unexpected reply %v: %v", reply, err)
	}
	flags := toInt(reply[0])
	t.Counted = flags&1 != 0
	t.Opened = flags&2 != 0
	t.Reopened = flags&4 != 0
	t.Closed = flags&8 != 0
	t.Cleared = flags&16 != 0
	t.Quarantined = flags&32 != 0
	t.ProbeReleased = flags&64 != 0
	t.Circuit = circuitFromReply(reply[1:])
	if len(calls) == 2 {
		c, err := calls[1].cmd.Slice()
		if err != nil || len(c) != 3 {
			return t, fmt.Errorf("redisstore: finish attempt: unexpected capacity reply %v: %v", c, err)
		}
		t.CapacityOpened = toInt(c[0]) == 1
		t.Capacity = store.Capacity{Until: fromMicros(toInt(c[1])), Quota: toInt(c[2]) == 1}
	}
	return t, nil
}

// AcquireProbe implements store.Probes with lua/probe.lua: one round trip.
func (s *Store) AcquireProbe(ctx context.Context, deploymentID, requestID string, now time.Time, ttl time.Duration) (bool, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	// The failure window only feeds the key's TTL; the circuit's own window end is already
	// covered by the grace period unless the window is longer than a day.
	n, err := s.scripts.probe.Run(ctx, s.rdb, []string{s.keys.state(deploymentID)},
		requestID, micros(now), durMicros(ttl), int64(0), durMicros(circuitGrace), stateTTL.Milliseconds()).Int64()
	if err != nil {
		return false, unavailable("acquire probe", err)
	}
	return n == 1, nil
}

// release names an in-flight entry to remove, and when its attempt ended.
type release struct {
	deploymentID, attemptID string
	now                     time.Time
}

// releaseBatch bounds the attempt ids of one release.lua call (they are unpacked onto the
// Lua stack).
const releaseBatch = 256

// releaseAttempts removes in-flight entries with lua/release.lua, which keeps each state
// record's in-flight summary in step with its set: Resilient replays the releases that failed
// while Redis was unreachable, so no entry waits for its expiry. Releases are grouped into one
// script call per deployment (and releaseBatch ids), all in one pipeline, so replaying a long
// outage costs a few calls per deployment rather than one per attempt. A batch may be large,
// so it gets the configuration timeout; a single release the operation timeout.
func (s *Store) releaseAttempts(ctx context.Context, rs []release) error {
	if len(rs) == 0 {
		return nil
	}
	timeout := s.opts.opTimeout
	if len(rs) > 1 {
		timeout = s.opts.cfgTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var calls []scriptCall
	open := make(map[string]int) // deployment → its call still taking ids
	for _, r := range rs {
		i, ok := open[r.deploymentID]
		if !ok || len(calls[i].args) >= 2+releaseBatch {
			i = len(calls)
			open[r.deploymentID] = i
			calls = append(calls, scriptCall{
				script: s.scripts.release,
				keys:   []string{s.keys.inflight(r.deploymentID), s.keys.state(r.deploymentID)},
				args:   []any{int64(0), stateTTL.Milliseconds()},
			})
		}
		c := &calls[i]
		// Prune with the latest end among the batch: later ends prune at least as much.
		if us := micros(r.now); us > c.args[0].(int64) {
			c.args[0] = us
		}
		c.args = append(c.args, r.attemptID)
	}
	if err := runScripts(ctx, s.rdb, calls); err != nil {
		return unavailable("replay releases", err)
	}
	return nil
}

func circuitFromReply(r []any) store.Circuit {
	po, _ := r[7].(string)
	return store.Circuit{
		Open:        toInt(r[0]) == 1,
		Cause:       store.OpenCause(toInt(r[1])),
		Failures:    uint32(toInt(r[2])),
		WindowStart: fromMicros(toInt(r[3])),
		OpenedAt:    fromMicros(toInt(r[4])),
		OpenUntil:   fromMicros(toInt(r[5])),
		Reopens:     uint32(toInt(r[6])),
		ProbeOwner:  po,
		ProbeUntil:  fromMicros(toInt(r[8])),
		ClosedAt:    fromMicros(toInt(r[9])),
	}
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case string:
		return atoi(n)
	default:
		return 0
	}
}

// formatFloat renders f so that Lua's tonumber reads back the same double.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
