package redisstore

import (
	"context"
	"strconv"
	"time"
)

// WatchConfig implements store.ConfigStore. Versions reach every replica two ways, so a
// missed notification is only late, never lost:
//   - pub/sub: every config script publishes its new version on the config channel;
//   - polling: the version key is read every poll interval, which catches messages lost
//     while the subscription was down (go-redis resubscribes on reconnect) or never sent.
//
// The first watch starts one watcher goroutine per Store; it runs until Close. The watcher
// also delivers the version it finds when it starts, so a change made between WatchConfig
// returning and the subscription becoming active is never missed.
func (s *Store) WatchConfig(ctx context.Context) <-chan uint64 {
	s.watchOnce.Do(func() {
		s.wg.Add(1)
		go s.watch()
	})
	return s.watchers.Add(ctx)
}

func (s *Store) watch() {
	defer s.wg.Done()
	ps := s.rdb.Subscribe(s.bg, s.keys.configChannel())
	defer func() { _ = ps.Close() }()
	msgs := ps.Channel()
	tick := time.NewTicker(s.opts.pollInterval)
	defer tick.Stop()

	var seen uint64
	observe := func(v uint64) {
		if v > seen {
			seen = v
			s.watchers.Notify(v)
		}
	}
	poll := func() {
		v, err := s.ConfigVersion(s.bg)
		if err != nil {
			if s.bg.Err() == nil {
				// Debug: Resilient reports outages once, rate limited; a poll every few
				// seconds would only repeat it.
				s.opts.logger.Debug("config version poll failed", "err", err)
			}
			return
		}
		observe(v)
	}
	poll()
	for {
		select {
		case <-s.bg.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			v, err := strconv.ParseUint(m.Payload, 10, 64)
			if err != nil {
				s.opts.logger.Warn("ignoring malformed config notification", "channel", m.Channel)
				continue
			}
			observe(v)
		case <-tick.C:
			poll()
		}
	}
}
