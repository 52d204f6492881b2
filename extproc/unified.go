package extproc

import (
	"encoding/json"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

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

// className names an attempt's failure class; a success has none.
func className(c failure.Class) string {
	if c == failure.ClassNone {
		return ""
	}
	return c.String()
}

// unifiedRouting describes the request's routing once the current attempt succeeded in
// latencyMs.
func (p *attemptProcessor) unifiedRouting(latencyMs int64) unifiedRouting {
	cur := p.cur
	u := unifiedRouting{
		Strategy:     p.snap.Settings.Strategy.String(),
		Deployment:   cur.Deployment,
		Model:        cur.Model,
		FallbackUsed: cur.Model != p.state.PublicModel(),
	}
	// The state opened when the attempt began, so its history is readable.
	if h, err := p.state.History(); err == nil {
		for _, a := range h.Attempts {
			u.Attempts = append(u.Attempts, routedAttempt{
				Deployment: a.Deployment, Model: a.Model, Move: a.Move.String(),
				LatencyMs: a.Latency.Milliseconds(), ErrorClass: className(a.Class), ErrorKind: string(a.Kind),
				Status: a.Status, ProviderRequestID: a.ProviderRequestID,
			})
		}
	}
	u.Attempts = append(u.Attempts, routedAttempt{
		Deployment: cur.Deployment, Model: cur.Model, Move: cur.Move.String(),
		LatencyMs: latencyMs, Status: p.status, ProviderRequestID: p.providerRequestID(),
	})
	u.Skipped = skipRecords(p.state.Skips())
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
