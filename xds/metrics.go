package xds

import "github.com/prometheus/client_golang/prometheus"

// metrics of the xDS server.
type metrics struct {
	nacks       *prometheus.CounterVec
	buildErrors prometheus.Counter
	version     prometheus.Gauge
	omitted     prometheus.Gauge
	omissions   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_xds_nacks_total",
			Help: "xDS responses an Envoy rejected (NACK), by resource type URL; the Envoy keeps its previous resources.",
		}, []string{"type_url"}),
		buildErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_xds_build_errors_total",
			Help: "Configuration versions that could not be turned into xDS resources; the previous snapshot stays published.",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_xds_snapshot_version",
			Help: "Configuration version of the xDS snapshot being published.",
		}),
		omitted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_xds_omitted_deployments",
			Help: "Deployments left out of the xDS snapshot in force because their cluster could not be built; they get no traffic.",
		}),
		omissions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_xds_deployment_omissions_total",
			Help: "Times a deployment was left out of the xDS snapshot (first time, or for a new reason).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.nacks, m.buildErrors, m.version, m.omitted, m.omissions)
	}
	return m
}
