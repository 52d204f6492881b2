package routing

import (
	"time"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// blocker says whether a candidate can take an attempt now, and if not, why (behaviour §4.1, §5).
type blocker uint8

const (
	eligible blocker = iota
	// needsProbe: half-open; usable only by the request that wins the probe (behaviour §5.4).
	needsProbe
	// blockedCooldown: the circuit is open after transient failures.
	blockedCooldown
	// blockedProbe: another request owns the half-open probe (behaviour §5.4). No mode, not even
	// whenAllOpen "try", admits it: exactly one request may hold a probe.
	blockedProbe
	// blockedQuarantine: the circuit is open after a configuration failure (behaviour §5.6).
	blockedQuarantine
	// blockedCapacity: the failure domain is rate limited (behaviour §4.3, §5.7).
	blockedCapacity
	// blockedQuota: the failure domain's quota is exhausted (behaviour §7.3).
	blockedQuota
	// blockedLimit: at or over rpmLimit or tpmLimit this minute (behaviour §4.1).
	blockedLimit
)

// usable reports whether the candidate may be picked (a probe still has to be won).
func (b blocker) usable() bool { return b == eligible || b == needsProbe }

// byCircuit reports whether only a circuit keeps the candidate out, which whenAllOpen "try"
// ignores (behaviour §7.5). Configuration quarantines, exhausted quotas, hard limits and a probe
// owned by another request stay.
func (b blocker) byCircuit() bool { return b == blockedCooldown || b == blockedCapacity }

// assess decides c's blocker at now and when it may be used again.
func (c *candidate) assess(now time.Time) {
	c.block, c.untilAvailable = eligible, 0
	st := &c.state
	switch st.Circuit.State(now) {
	case store.StateCooldown:
		c.block = blockedCooldown
		if st.Circuit.Cause == store.CauseConfiguration {
			c.block = blockedQuarantine
		}
		c.untilAvailable = st.Circuit.OpenUntil.UnixNano()
		return
	case store.StateProbing:
		c.block = blockedProbe
		c.untilAvailable = st.Circuit.ProbeUntil.UnixNano()
		return
	case store.StateHalfOpen:
		c.block = needsProbe
	}
	if st.Capacity.Limited(now) {
		c.block = blockedCapacity
		if st.Capacity.Quota {
			c.block = blockedQuota
		}
		c.untilAvailable = st.Capacity.Until.UnixNano()
		return
	}
	if overLimit(c.dep, &st.Metrics) {
		// Skipped for this attempt, not cooled down (behaviour §4.1); the counters reset with the
		// next minute.
		c.block = blockedLimit
		c.untilAvailable = nextMinute(now).UnixNano()
	}
}

// reopens reports whether c is blocked only for a while, so that when it may be used again
// is worth advertising as a Retry-After: cooling down, probed by another request, rate
// limited, or over its limits this minute. A quarantine (its probe included, behaviour §5.6)
// and an exhausted quota are not expected back soon enough.
func (c *candidate) reopens() bool {
	switch c.block {
	case blockedCooldown, blockedCapacity, blockedLimit:
		return true
	case blockedProbe:
		return c.state.Circuit.Cause != store.CauseConfiguration
	}
	return false
}

// reopensIn is the time from now until c may be used again (meaningful when
// c.untilAvailable is set).
func (c *candidate) reopensIn(now time.Time) time.Duration {
	return time.Unix(0, c.untilAvailable).Sub(now)
}

// overLimit reports whether d is at or over its rpmLimit or tpmLimit this minute.
func overLimit(d *config.Deployment, m *store.Metrics) bool {
	return (d.RPMLimit > 0 && m.RPM >= d.RPMLimit) || (d.TPMLimit > 0 && m.TPM >= d.TPMLimit)
}

// nextMinute is when the per-minute counters of now's minute reset.
func nextMinute(now time.Time) time.Time { return time.Unix((store.MinuteOf(now)+1)*60, 0) }
