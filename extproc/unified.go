package extproc

import (
	"encoding/json"

	"github.com/tidwall/sjson"

	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
)

// unifiedRouting is the object SPEC §10.1 adds to a response when the client sent
// x-unified-routing-metadata: true.
type unifiedRouting struct {
	Strategy     string          `json:"strategy"`
	Deployment   string          `json:"deployment"`
	Model        string          `json:"model"`
	FallbackUsed bool            `json:"fallback_used"`
	Pick         string          `json:"pick,omitempty"`
	Attempts     []routedAttempt `json:"attempts"`
}

type routedAttempt struct {
	Deployment string `json:"deployment"`
	Model      string `json:"model"`
	Move       string `json:"move"`
	LatencyMs  int64  `json:"latency_ms"`
	ErrorClass string `json:"error_class,omitempty"`
	ErrorKind  string `json:"error_kind,omitempty"`
	Status     int    `json:"status,omitempty"`
}

func moveName(m statev1.Move) string {
	switch m {
	case statev1.Move_MOVE_FAILOVER:
		return "failover"
	case statev1.Move_MOVE_RETRY:
		return "retry"
	case statev1.Move_MOVE_FALLBACK:
		return "fallback"
	default:
		return "first"
	}
}

func className(c statev1.Class) string {
	switch c {
	case statev1.Class_CLASS_REQUEST:
		return "request"
	case statev1.Class_CLASS_THROTTLE:
		return "throttle"
	case statev1.Class_CLASS_TRANSIENT:
		return "transient"
	case statev1.Class_CLASS_CONFIGURATION:
		return "configuration"
	case statev1.Class_CLASS_GATEWAY:
		return "gateway"
	case statev1.Class_CLASS_INCOMPATIBLE:
		return "incompatible"
	}
	return ""
}

// unifiedRouting describes the request's routing once the current attempt succeeded in
// latencyMs.
func (p *attemptProcessor) unifiedRouting(latencyMs int64) unifiedRouting {
	cur := p.state.GetCurrent()
	u := unifiedRouting{
		Strategy:     p.s.router.Config().Settings.Strategy.String(),
		Deployment:   cur.GetDeploymentId(),
		Model:        cur.GetModel(),
		FallbackUsed: cur.GetModel() != p.state.GetPublicModel(),
	}
	for _, a := range p.state.GetAttempts() {
		u.Attempts = append(u.Attempts, routedAttempt{
			Deployment: a.GetDeploymentId(), Model: a.GetModel(), Move: moveName(a.GetMove()),
			LatencyMs: a.GetLatencyNanos() / 1e6, ErrorClass: className(a.GetClass()), ErrorKind: a.GetKind(),
			Status: int(a.GetStatus()),
		})
	}
	u.Attempts = append(u.Attempts, routedAttempt{
		Deployment: cur.GetDeploymentId(), Model: cur.GetModel(), Move: moveName(cur.GetMove()),
		LatencyMs: latencyMs, Status: p.status,
	})
	return u
}

// withUnifiedRouting adds u to a JSON response body; a body that is not a JSON object is
// left alone.
func withUnifiedRouting(body []byte, u unifiedRouting) []byte {
	raw, err := json.Marshal(u)
	if err != nil {
		return body
	}
	out, err := sjson.SetRawBytes(body, "unified_routing", raw)
	if err != nil {
		return body
	}
	return out
}
