// Package clock is the binary's one time source: the routing core, the data plane, the
// store wrapper, the configuration follower and guard, and the xDS server all take a Clock,
// and the binary gives them the same one. Tests inject internal/fakeclock.
package clock

import "time"

// Clock tells the time and waits.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// System is the wall clock.
type System struct{}

// Now implements Clock.
func (System) Now() time.Time { return time.Now() }

// After implements Clock.
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }
