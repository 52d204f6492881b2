package redisstore

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Operation labels of switchyard_store_local_operations_total.
const (
	opReadStates    = "read_states"
	opStartAttempt  = "start_attempt"
	opFinishAttempt = "finish_attempt"
	opAcquireProbe  = "acquire_probe"
	opReserve       = "reserve"
	opUnreserve     = "unreserve"
	opLoadConfig    = "load_config"
	opConfigVersion = "config_version"
)

// resilientMetrics is what operators watch during a Redis outage (docs/redis.md).
type resilientMetrics struct {
	degraded     prometheus.Gauge
	degradations prometheus.Counter
	errors       prometheus.Counter
	localOps     *prometheus.CounterVec
	checks       *prometheus.CounterVec
	queued       prometheus.Gauge
	replayed     prometheus.Counter
	dropped      prometheus.Counter
}

func newResilientMetrics(reg prometheus.Registerer) (resilientMetrics, error) {
	m := resilientMetrics{
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_store_degraded",
			Help: "1 while routing runs on process-local state because Redis is unreachable.",
		}),
		degradations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_store_degradations_total",
			Help: "Switches from Redis to process-local state.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_store_redis_errors_total",
			Help: "Failed or timed-out Redis calls on the routing and config paths (recovery checks excluded).",
		}),
		localOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_store_local_operations_total",
			Help: "Store operations served from process-local state, by operation.",
		}, []string{"operation"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_store_recovery_checks_total",
			Help: "Checks of an unreachable Redis, by result (ok, failed).",
		}, []string{"result"}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_store_queued_releases",
			Help: "In-flight releases waiting for Redis to come back.",
		}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_store_replayed_releases_total",
			Help: "In-flight releases replayed to Redis after an outage.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_store_dropped_releases_total",
			Help: "In-flight releases dropped because the replay queue was full; their entries expire on their own.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.degraded, m.degradations, m.errors, m.localOps, m.checks, m.queued, m.replayed, m.dropped} {
		if err := reg.Register(c); err != nil {
			return resilientMetrics{}, fmt.Errorf("redisstore: register metrics: %w", err)
		}
	}
	return m, nil
}
