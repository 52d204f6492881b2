package extproc

import (
	"encoding/json"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// unifiedRouting is the object behaviour §10.1 adds to a response when the client sent
// x-unified-routing-metadata: true.
type unifiedRouting struct {
	Strategy     string          `json:"strategy"`
	Deployment   string          `json:"deployment"`
	Model        string          `json:"model"`
	FallbackUsed bool            `json:"fallback_used"`
	Pick         string          `json:"pick,omitempty"`
	Attempts     []routedAttempt `json:"attempts"`
	// Skipped are the deployments and fallback models routing passed over, and why
	// (behaviour §9.2).
	Skipped []skipRecord `json:"skipped,omitempty"`
	// Anomalies: what the stream lacked, known when unified_routing was written, which is
	// before the end marker on Anthropic streams (behaviour §8.4).
	Anomalies []string `json:"anomalies,omitempty"`
}

type routedAttempt struct {
	Deployment string `json:"deployment"`
	Model      string `json:"model"`
	Move       string `json:"move"`
	LatencyMs  int64  `json:"latency_ms"`
	ErrorClass string `json:"error_class,omitempty"`
	ErrorKind  string `json:"error_kind,omitempty"`
	Status     int    `json:"status,omitempty"`
	// ProviderRequestID is the provider's own id of its response: the one place a client
	// sees it (docs/extproc.md, "Response headers").
	ProviderRequestID string `json:"provider_request_id,omitempty"`
}

// moveName and className name the state's enums as routing does (each proto value is the
// routing value + 1); a success has no class.
func moveName(m statev1.Move) string { return routing.Move(max(m, 1) - 1).String() }

func className(c statev1.Class) string {
	if c <= statev1.Class_CLASS_NONE {
		return ""
	}
	return failure.Class(c - 1).String()
}

// unifiedRouting describes the request's routing once the current attempt succeeded in
// latencyMs.
func (p *attemptProcessor) unifiedRouting(latencyMs int64) unifiedRouting {
	cur := p.state.GetCurrent()
	u := unifiedRouting{
		Strategy:     p.snap.Settings.Strategy.String(),
		Deployment:   cur.GetDeploymentId(),
		Model:        cur.GetModel(),
		FallbackUsed: cur.GetModel() != p.state.GetPublicModel(),
	}
	for _, a := range p.state.GetAttempts() {
		u.Attempts = append(u.Attempts, routedAttempt{
			Deployment: a.GetDeploymentId(), Model: a.GetModel(), Move: moveName(a.GetMove()),
			LatencyMs: a.GetLatencyNanos() / 1e6, ErrorClass: className(a.GetClass()), ErrorKind: a.GetKind(),
			Status: int(a.GetStatus()), ProviderRequestID: a.GetProviderRequestId(),
		})
	}
	u.Attempts = append(u.Attempts, routedAttempt{
		Deployment: cur.GetDeploymentId(), Model: cur.GetModel(), Move: moveName(cur.GetMove()),
		LatencyMs: latencyMs, Status: p.status, ProviderRequestID: p.providerRequestID(),
	})
	u.Skipped = skipRecords(stateSkips(p.state))
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

// withPublicModel names the public model in a JSON answer's top-level "model" (Chat,
// Responses, Messages and Embeddings all put it there), where the provider named its own:
// the client asked for the public model and must not learn which deployment served. A body
// without a string "model" is left alone.
func withPublicModel(body []byte, model string) []byte {
	r := gjson.GetBytes(body, "model")
	if model == "" || r.Type != gjson.String || r.Str == model {
		return body
	}
	out, err := sjson.SetBytes(body, "model", model)
	if err != nil {
		return body
	}
	return out
}
