package extproc

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-gw/switchyard/routing"
)

// deploymentStates is what the deployment collector reads at each scrape
// (routing.Router.Deployments).
type deploymentStates interface {
	Deployments(ctx context.Context) ([]routing.DeploymentStatus, error)
}

// scrapeReadTimeout bounds the store read of one scrape, well under Prometheus's default
// scrape timeout (10 s).
const scrapeReadTimeout = 3 * time.Second

// deploymentCollector reports each deployment's state now, read from the shared store at
// scrape time, so every replica shows the same values however little traffic it serves
// (behaviour §10.4): the circuit state (one series per state, 1 for the current), the
// seconds until the deployment may be tried, and its attempts in flight. A failed read
// leaves the gauges out of that scrape and counts the failure.
type deploymentCollector struct {
	src        deploymentStates
	log        *slog.Logger
	circuit    *prometheus.Desc
	retryAfter *prometheus.Desc
	inFlight   *prometheus.Desc
	readErrors prometheus.Counter
}

// NewDeploymentCollector returns the collector of the deployments' live state; register
// it with the registry /metrics serves.
func NewDeploymentCollector(src deploymentStates, log *slog.Logger) prometheus.Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &deploymentCollector{
		src: src, log: log,
		circuit: prometheus.NewDesc("switchyard_deployment_circuit_state",
			"The deployment's circuit now: 1 for its state (closed, open, half_open, quarantined, disabled), 0 for the others.",
			[]string{"switchyard_deployment", "state"}, nil),
		retryAfter: prometheus.NewDesc("switchyard_deployment_retry_after_seconds",
			"Seconds until the deployment may be tried again (open circuit, rate limit, quota, minute limits); 0 when it may be tried now.",
			[]string{"switchyard_deployment"}, nil),
		inFlight: prometheus.NewDesc("switchyard_deployment_attempts_in_flight",
			"Attempts in flight on the deployment, on every replica sharing the store.",
			[]string{"switchyard_deployment"}, nil),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_deployment_state_read_errors_total",
			Help: "Scrapes whose read of the deployments' state failed (the deployment gauges were left out).",
		}),
	}
}

func (c *deploymentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.circuit
	ch <- c.retryAfter
	ch <- c.inFlight
	c.readErrors.Describe(ch)
}

func (c *deploymentCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeReadTimeout)
	defer cancel()
	deps, err := c.src.Deployments(ctx)
	if err != nil {
		c.readErrors.Inc()
		c.log.Warn("reading the deployments' state for /metrics failed", "err", err)
	}
	c.readErrors.Collect(ch)
	if err != nil {
		return
	}
	states := routing.CircuitStates()
	for _, d := range deps {
		for _, s := range states {
			v := 0.0
			if s == d.Circuit {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.circuit, prometheus.GaugeValue, v, d.ID, s)
		}
		ch <- prometheus.MustNewConstMetric(c.retryAfter, prometheus.GaugeValue, float64(d.RetryAfterMs)/1000, d.ID)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(d.InFlight), d.ID)
	}
}
