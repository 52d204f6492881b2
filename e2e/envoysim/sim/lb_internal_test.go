package sim

import (
	"slices"
	"testing"
	"time"
)

// LoadBalancerBase::recalculatePriorityLoad with overprovisioning 140.
func TestPriorityLoad(t *testing.T) {
	cases := []struct{ health, want []int }{
		{[]int{100, 100}, []int{100, 0}},
		{[]int{70, 100}, []int{70, 30}},
		{[]int{0, 100}, []int{0, 100}},
		{[]int{0, 0}, []int{100, 0}},   // nothing available: everything to P0
		{[]int{20, 20}, []int{50, 50}}, // scaled to the total availability
	}
	for _, c := range cases {
		if got := priorityLoad(c.health); !slices.Equal(got, c.want) {
			t.Errorf("priorityLoad(%v) = %v, want %v", c.health, got, c.want)
		}
	}
	hs := &hostSet{overprovision: 140, priorities: [][]*host{{{healthy: true}, {healthy: false}}, {{healthy: true}}}}
	if got := hs.health(); !slices.Equal(got, []int{70, 100}) {
		t.Errorf("health %v", got)
	}
}

// previous_priorities with update_frequency 1: P0, then P1, then (no priority left)
// the original load.
func TestPreviousPrioritiesPlugin(t *testing.T) {
	pp := &previousPriorities{updateFrequency: 1}
	health := []int{100, 100}
	orig := priorityLoad(health)
	p0, p1 := &host{priority: 0}, &host{priority: 1}
	if got := pp.determinePriorityLoad(health, orig); !slices.Equal(got, []int{100, 0}) {
		t.Fatalf("first attempt %v", got)
	}
	pp.onHostAttempted(p0)
	if got := pp.determinePriorityLoad(health, orig); !slices.Equal(got, []int{0, 100}) {
		t.Fatalf("after P0 %v", got)
	}
	pp.onHostAttempted(p1)
	if got := pp.determinePriorityLoad(health, orig); !slices.Equal(got, orig) {
		t.Fatalf("after P0, P1 %v", got)
	}
}

// JitteredExponentialBackOffStrategy: [0, base), [0, 2*base), ... capped at max.
func TestRetryBackoff(t *testing.T) {
	rs := &retryState{nextInterval: 25 * time.Millisecond, maxInterval: 250 * time.Millisecond}
	limits := []time.Duration{25, 50, 100, 200, 250, 250}
	for i, l := range limits {
		if d := rs.backoff(); d < 0 || d >= l*time.Millisecond {
			t.Fatalf("retry %d: %v not in [0, %v)", i+1, d, l*time.Millisecond)
		}
	}
}

func TestParseRetryOn(t *testing.T) {
	bits, ok := parseRetryOn(" 5xx, connect-failure ,reset")
	if !ok || bits != retryOn5xx|retryOnConnectFailure|retryOnReset {
		t.Fatalf("bits %b ok %v", bits, ok)
	}
	if _, ok := parseRetryOn("5xx,bogus"); ok {
		t.Fatal("unknown value accepted")
	}
}

func TestPathAndQuery(t *testing.T) {
	for in, want := range map[string]string{
		"http://h/a/b?x=1#frag": "/a/b?x=1",
		"http://h":              "/",
		"https://h:8443?q":      "/?q",
	} {
		if got := pathAndQuery(in); got != want {
			t.Errorf("pathAndQuery(%q) = %q, want %q", in, got, want)
		}
	}
}
