package extproc

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Metrics are the data plane's Prometheus metrics. Names and labels follow the OpenTelemetry
// GenAI semantic conventions where they exist (gen_ai_*), switchyard_* for the rest
// (behaviour §10.4). A nil *Metrics records nothing.
type Metrics struct {
	duration     *prometheus.HistogramVec
	tokens       *prometheus.HistogramVec
	attempts     *prometheus.CounterVec
	stops        *prometheus.CounterVec
	requests     *prometheus.CounterVec
	messages     *prometheus.HistogramVec
	stateRejects *prometheus.CounterVec
	moves        *prometheus.CounterVec
	circuits     *prometheus.CounterVec
	ttft         *prometheus.HistogramVec
	clientAuth   *prometheus.CounterVec
	skips        *prometheus.CounterVec
	anomalies    *prometheus.CounterVec
	released     *prometheus.CounterVec
	// observers are messages' series, resolved once: a streamed chunk observes its
	// processing time without looking its labels up.
	observers [numRoles][numMessageKinds]prometheus.Observer
}

// roleKind and messageKind name a message's series of switchyard_extproc_message_duration_seconds.
type (
	roleKind    uint8
	messageKind uint8
)

const (
	roleRoute roleKind = iota
	roleAttempt
	numRoles
)

func (r roleKind) String() string {
	if r == roleRoute {
		return contract.RoleRoute
	}
	return contract.RoleAttempt
}

const (
	msgRequestHeaders messageKind = iota
	msgRequestBody
	msgRequestTrailers
	msgResponseHeaders
	msgResponseBody
	msgResponseTrailers
	numMessageKinds
)

func (k messageKind) String() string {
	switch k {
	case msgRequestHeaders:
		return "request_headers"
	case msgRequestBody:
		return "request_body"
	case msgRequestTrailers:
		return "request_trailers"
	case msgResponseHeaders:
		return "response_headers"
	case msgResponseBody:
		return "response_body"
	default:
		return "response_trailers"
	}
}

// NewMetrics registers the data plane's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_operation_duration_seconds",
			Help:    "Duration of upstream attempts, from the request going out to the end of the response (behaviour §3.3).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"gen_ai_request_model", "gen_ai_provider_name", "switchyard_deployment", "error_type"}),
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_token_usage",
			Help:    "Tokens used per successful attempt, as the provider reported them.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}, []string{"gen_ai_request_model", "gen_ai_provider_name", "switchyard_deployment", "gen_ai_token_type"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_attempts_total",
			Help: "Upstream attempts by deployment and outcome class (none = success).",
		}, []string{"switchyard_deployment", "class", "error_type"}),
		stops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_requests_stopped_total",
			Help: "Requests answered with an error by the route role, by code and status.",
		}, []string{"gen_ai_request_model", "code", "status"}),
		// One series per request outcome, so served and stopped add up to the requests that
		// reached routing: the attempt role counts what it served, the route role what it
		// stopped.
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_requests_total",
			Help: "Requests by requested public model and outcome: served (a successful attempt answered it) or stopped (the route role answered an error).",
		}, []string{"gen_ai_request_model", "outcome"}),
		messages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_extproc_message_duration_seconds",
			Help:    "The gateway's own processing time per ext_proc message (backoff waits excluded).",
			Buckets: []float64{0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25},
		}, []string{"role", "message"}),
		clientAuth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_client_auth_rejected_total",
			Help: "Client requests refused by the client-key check, by reason (missing, invalid, model_not_allowed, unavailable).",
		}, []string{"reason"}),
		stateRejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_state_rejected_total",
			Help: "x-switchyard-state values that did not open (forged, expired, other key or request).",
		}, []string{"reason"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_moves_total",
			Help: "Attempts scheduled by move (first, failover, retry, fallback).",
		}, []string{"gen_ai_request_model", "move"}),
		circuits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_circuit_transitions_total",
			Help: "Circuit transitions caused by attempt outcomes (opened, reopened, closed, quarantined, rate_limited).",
		}, []string{"switchyard_deployment", "transition"}),
		anomalies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_stream_anomalies_total",
			Help: "What complete streams lacked, by kind as in unified_routing.anomalies (no [DONE], no message_stop, no stop_reason: inferred end_turn, empty response, …).",
		}, []string{"switchyard_deployment", "kind"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_attempts_released_total",
			Help: "Attempt streams Envoy ended without a verdict: a client that went away, or a connect failure or reset, which the trampoline counts in switchyard_attempts_total.",
		}, []string{"switchyard_deployment"}),
	}
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_server_time_to_first_token_seconds",
		Help:    "Time from the request going upstream to the first committing stream frame (content, reasoning or tool call).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120},
	}, []string{"gen_ai_request_model", "gen_ai_provider_name", "switchyard_deployment"})
	// Labelled by the requested public model and the cause only (routing.SkipCauses): the
	// deployment is in the request's log record and unified_routing, not in a series.
	m.skips = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_skips_total",
		Help: "Deployments and fallback models passed over by routing, by requested model and reason (capability, policy, limit, unserved), once per request and target.",
	}, []string{"gen_ai_request_model", "reason"})
	reg.MustRegister(m.duration, m.tokens, m.attempts, m.stops, m.requests, m.messages, m.stateRejects, m.moves, m.circuits, m.ttft, m.clientAuth, m.skips, m.anomalies, m.released)
	for r := range numRoles {
		for k := range numMessageKinds {
			m.observers[r][k] = m.messages.WithLabelValues(r.String(), k.String())
		}
	}
	return m
}

func errorType(c failure.Classification) string {
	if c.Class == failure.ClassNone {
		return ""
	}
	if c.Kind != failure.KindNone {
		return string(c.Kind)
	}
	return c.Class.String()
}

func (m *Metrics) attemptFinished(d *config.Deployment, model string, res routing.Result, t store.Transition) {
	if m == nil || d == nil {
		return
	}
	if name := transitionName(t); name != "unchanged" {
		m.circuits.WithLabelValues(d.ID, name).Inc()
	}
	if res.Classification.Class == failure.ClassGateway && res.Classification.Status == 499 {
		// Released without a verdict (attemptProcessor.release): no attempt outcome, or a
		// connect failure would count twice, here and as the trampoline's.
		m.released.WithLabelValues(d.ID).Inc()
		return
	}
	et := errorType(res.Classification)
	m.duration.WithLabelValues(model, string(d.Provider), d.ID, et).Observe(res.Latency.Seconds())
	m.attempts.WithLabelValues(d.ID, res.Classification.Class.String(), et).Inc()
	if res.Classification.Class == failure.ClassNone && res.TotalTokens > 0 {
		m.tokens.WithLabelValues(model, string(d.Provider), d.ID, "output").Observe(float64(res.CompletionTokens))
		m.tokens.WithLabelValues(model, string(d.Provider), d.ID, "input").Observe(float64(res.TotalTokens - res.CompletionTokens))
	}
}

func (m *Metrics) requestStopped(model string, s *routing.StopError) {
	if m == nil {
		return
	}
	m.stops.WithLabelValues(model, s.Code, strconv.Itoa(s.Status)).Inc()
	m.requests.WithLabelValues(model, "stopped").Inc()
}

// requestServed counts a request a successful attempt answered.
func (m *Metrics) requestServed(model string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(model, "served").Inc()
}

// skipped counts the skips a decision recorded (each target once per request: a decision
// only reports skips the request did not record before).
func (m *Metrics) skipped(model string, skips []routing.Skip) {
	if m == nil {
		return
	}
	for _, s := range skips {
		m.skips.WithLabelValues(model, s.Cause.String()).Inc()
	}
}

func (m *Metrics) moved(model string, move routing.Move) {
	if m == nil {
		return
	}
	m.moves.WithLabelValues(model, move.String()).Inc()
}

func (m *Metrics) observeMessage(role roleKind, message messageKind, d time.Duration) {
	if m == nil {
		return
	}
	m.observers[role][message].Observe(d.Seconds())
}

func (m *Metrics) stateRejected(reason attemptstate.RejectReason) {
	if m == nil {
		return
	}
	m.stateRejects.WithLabelValues(string(reason)).Inc()
}

func (m *Metrics) clientRejected(reason string) {
	if m == nil {
		return
	}
	m.clientAuth.WithLabelValues(reason).Inc()
}

func (m *Metrics) firstToken(d *config.Deployment, model string, ttft time.Duration) {
	if m == nil || d == nil {
		return
	}
	m.ttft.WithLabelValues(model, string(d.Provider), d.ID).Observe(ttft.Seconds())
}

// streamAnomalies counts what a complete stream lacked (behaviour §8.4), each kind once.
func (m *Metrics) streamAnomalies(d *config.Deployment, anomalies []string) {
	if m == nil || d == nil {
		return
	}
	for _, a := range anomalies {
		m.anomalies.WithLabelValues(d.ID, a).Inc()
	}
}
