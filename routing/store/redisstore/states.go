package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// ReadStates implements store.States: every candidate's circuit, in-flight count and metrics
// and every distinct failure domain's capacity circuit, read fresh in one round trip.
//
// Each deployment's state is one string and each domain's capacity circuit another, so the
// read is one bulk reply per key: on a single-node client (standalone, Sentinel) one MGET of
// all of them, on a Cluster client a pipeline of GETs that go-redis splits by node and sends
// concurrently (one round trip per node, in parallel). Plain reads suffice: every write is a
// script that rewrites a whole record atomically; derived values (current minute, health
// window, half-open) are computed from stored timestamps and now.
//
// The in-flight count comes from the summary in the state record, which the scripts
// recompute from the in-flight set on every write. It is exact while now is before the
// earliest expiry it records (every entry is still live). Past it, an entry expired with no
// write since (its replica crashed, or the set is idle), and only then the set itself is
// counted: a second round trip, for just those deployments.
func (s *Store) ReadStates(ctx context.Context, now time.Time, refs []store.DeploymentRef, out []store.DeploymentState) error {
	if len(refs) == 0 {
		return nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	sc := s.reads.Get().(*readScratch)
	defer s.putScratch(sc)

	// Candidates of one group often share a failure domain: read each domain once. Groups
	// are small, so a linear scan beats a map.
	sc.domainOf = sc.domainOf[:0]
	sc.domains = sc.domains[:0]
	for _, ref := range refs {
		j := -1
		for k, d := range sc.domains {
			if d == ref.Domain {
				j = k
				break
			}
		}
		if j < 0 {
			j = len(sc.domains)
			sc.domains = append(sc.domains, ref.Domain)
		}
		sc.domainOf = append(sc.domainOf, j)
	}

	vals, err := s.readRecords(ctx, refs, sc)
	if err != nil {
		return unavailable("read states", err)
	}

	minute, nowUS := store.MinuteOf(now), micros(now)
	caps := sc.caps[:0]
	for _, v := range vals[len(refs):] {
		caps = append(caps, parseCapacity(v))
	}
	sc.caps = caps
	stale := sc.stale[:0]
	for i := range refs {
		out[i] = store.DeploymentState{Capacity: caps[sc.domainOf[i]]}
		inf, earliest := parseState(vals[i], minute, &out[i])
		out[i].Metrics.InFlight = inf
		if inf > 0 && nowUS >= earliest {
			stale = append(stale, i)
		}
	}
	sc.stale = stale
	if len(stale) > 0 {
		if err := s.countInFlight(ctx, nowUS, refs, stale, out); err != nil {
			return err
		}
	}
	return nil
}

// readScratch is one ReadStates call's working memory, pooled: a decision then allocates
// only the commands and what go-redis allocates for the replies.
type readScratch struct {
	domains  []string
	domainOf []int // refs[i]'s index in domains
	args     []any // MGET's arguments, or the GETs' two by two
	cmds     []redis.Cmder
	gets     []*redis.StringCmd
	vals     []string // the records: one per ref, then one per domain
	caps     []store.Capacity
	stale    []int // refs whose in-flight summary is past its earliest expiry
}

func (s *Store) putScratch(sc *readScratch) {
	// Drop references to replies, commands and ids so the pool pins nothing of a past call.
	clear(sc.domains)
	clear(sc.args)
	clear(sc.cmds)
	clear(sc.gets)
	clear(sc.vals)
	s.reads.Put(sc)
}

// readRecords reads the state record of every ref and the capacity record of every domain
// in sc.domains, in that order; a missing key reads as "".
func (s *Store) readRecords(ctx context.Context, refs []store.DeploymentRef, sc *readScratch) ([]string, error) {
	n := len(refs) + len(sc.domains)
	if s.mget {
		args := append(sc.args[:0], "mget")
		for _, ref := range refs {
			args = append(args, s.stateArgs.get(ref.ID))
		}
		for _, d := range sc.domains {
			args = append(args, s.capacityArgs.get(d))
		}
		sc.args = args
		cmd := redis.NewStringSliceCmd(ctx, args...)
		if err := s.rdb.Process(ctx, cmd); err != nil {
			return nil, err
		}
		vals := cmd.Val()
		if len(vals) != n {
			return nil, errors.New("redisstore: MGET answered " + strconv.Itoa(len(vals)) + " values for " + strconv.Itoa(n) + " keys")
		}
		return vals, nil
	}

	args := sc.args[:0]
	for _, ref := range refs {
		args = append(args, "get", s.stateArgs.get(ref.ID))
	}
	for _, d := range sc.domains {
		args = append(args, "get", s.capacityArgs.get(d))
	}
	sc.args = args
	cmds, gets := sc.cmds[:0], sc.gets[:0]
	for i := 0; i < len(args); i += 2 {
		g := redis.NewStringCmd(ctx, args[i:i+2:i+2]...)
		cmds, gets = append(cmds, g), append(gets, g)
	}
	sc.cmds, sc.gets = cmds, gets
	pipe := s.pipes.Get().(redis.Pipeliner)
	_ = pipe.BatchProcess(ctx, cmds...) // only queues
	_, err := pipe.Exec(ctx)
	s.pipes.Put(pipe) // Exec emptied it
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	vals := sc.vals[:0]
	for _, g := range gets {
		if err := g.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		vals = append(vals, g.Val()) // "" for a missing key (redis.Nil)
	}
	sc.vals = vals
	return vals, nil
}

// countInFlight counts the in-flight sets of refs[stale...] at now: the rare second round
// trip of a read, for deployments whose summary lists an entry that has expired since the
// last write.
func (s *Store) countInFlight(ctx context.Context, nowUS int64, refs []store.DeploymentRef, stale []int, out []store.DeploymentState) error {
	above := "(" + strconv.FormatInt(nowUS, 10)
	pipe := s.rdb.Pipeline()
	counts := make([]*redis.IntCmd, len(stale))
	for k, i := range stale {
		counts[k] = pipe.ZCount(ctx, s.keys.inflight(refs[i].ID), above, "+inf")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable("count in-flight", err)
	}
	for k, i := range stale {
		out[i].Metrics.InFlight = counts[k].Val()
	}
	return nil
}

// parseState fills st's circuit and metrics from a state record (the format is documented at
// load_state in lua/common.lua) and returns the in-flight summary: the number of entries and
// the earliest expiry among them (µs). It allocates nothing: the probe owner is a substring
// of v. An empty record is the zero state.
func parseState(v string, minute int64, st *store.DeploymentState) (inFlight, earliest int64) {
	if v == "" {
		return 0, 0
	}
	r := record(v)
	m := &st.Metrics
	rpmMinute := r.int()
	rpm, tpm := r.int(), r.int()
	if rpmMinute == minute {
		m.RPM, m.TPM = rpm, tpm
	}
	if f := r.next(); f != "" {
		m.LatencyEWMA, m.HasLatency = atof(f), true
	}
	if f := r.next(); f != "" {
		m.ThroughputEWMA, m.HasThroughput = atof(f), true
	}
	inFlight, earliest = r.int(), r.int()
	// Health slots "minute:successes:failures"; only those inside the window ending at
	// minute count (the semantics of memstore).
	for h := r.next(); h != ""; {
		var slot string
		slot, h, _ = strings.Cut(h, ",")
		bm, rest, _ := strings.Cut(slot, ":")
		hs, hf, _ := strings.Cut(rest, ":")
		if slot != "" && store.InHealthWindow(atoi(bm), minute) {
			m.Successes += atoi(hs)
			m.Failures += atoi(hf)
		}
	}
	c := &st.Circuit
	c.Open = r.int() == 1
	c.Cause = store.OpenCause(r.int())
	c.Failures = uint32(r.int())
	c.WindowStart = fromMicros(r.int())
	c.OpenedAt = fromMicros(r.int())
	c.OpenUntil = fromMicros(r.int())
	c.Reopens = uint32(r.int())
	c.ProbeUntil = fromMicros(r.int())
	c.ClosedAt = fromMicros(r.int())
	c.ProbeOwner = string(r) // the rest: the owner may contain '|'
	return inFlight, earliest
}

// record walks the '|'-separated fields of a stored record.
type record string

// next returns the next field; past the last one it returns "".
func (r *record) next() string {
	f, rest, _ := strings.Cut(string(*r), "|")
	*r = record(rest)
	return f
}

func (r *record) int() int64 { return atoi(r.next()) }

// parseCapacity reads a capacity record "until|quota" written by lua/capacity.lua.
func parseCapacity(v string) store.Capacity {
	if v == "" {
		return store.Capacity{}
	}
	r := record(v)
	return store.Capacity{Until: fromMicros(r.int()), Quota: r.next() == "1"}
}

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

// atoi parses a stored decimal integer without allocating (strconv allocates its error);
// an empty, malformed or out-of-range field reads as 0, like an absent one.
func atoi(s string) int64 {
	neg := s != "" && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if s == "" || len(s) > 18 { // 18 digits cannot overflow an int64
		return 0
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		return -n
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
