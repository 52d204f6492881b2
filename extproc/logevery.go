package extproc

import (
	"sync"
	"time"
)

// logEvery lets one log record through per interval and counts the ones it held back, so a
// condition that hits every request (a store outage) logs a line per interval with a count,
// not a line per request. The zero value is ready to use.
type logEvery struct {
	mu     sync.Mutex
	last   time.Time // when the last record went through; zero before any
	held   int       // records held back since
	logged bool
}

// allow reports whether a record goes through at now and, if so, how many were held back
// since the previous one.
func (l *logEvery) allow(now time.Time, interval time.Duration) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged && now.Sub(l.last) < interval {
		l.held++
		return false, 0
	}
	held, l.held = l.held, 0
	l.last, l.logged = now, true
	return true, held
}
