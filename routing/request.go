package routing

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// Request is what the router knows of a logical request. A logical request spans every
// attempt, retry and fallback made for one client request.
type Request struct {
	// ID identifies the logical request across attempts and replicas (probe ownership, the
	// one-failure-per-request rule).
	ID        string
	Model     string
	Operation config.Operation
	Stream    bool
	Facts     Facts
	// Start is when the logical request began; the total deadline runs from it.
	Start time.Time
	// Models is the client key's allow-list of public models (nil: every model). The
	// requested model was checked before routing; fallback targets outside it are skipped.
	Models []string
}

// allows reports whether the client may be served model.
func (r *Request) allows(model string) bool {
	return len(r.Models) == 0 || slices.Contains(r.Models, model)
}

// Mode is the request's response mode.
func (r *Request) Mode() config.Mode {
	if r.Stream {
		return config.ModeStream
	}
	return config.ModeJSON
}

// Facts are the capability needs derived from the request body (behaviour §9.2). The dialect
// parsers fill them; the router only compares them with what deployments declare.
type Facts struct {
	// API is the wire API of the request (a deployment must speak it, behaviour §9.2, §13.2).
	API               API
	Tools             bool
	ParallelToolCalls bool
	StructuredOutput  bool // response_format / text.format json_schema
	// Modalities beyond text present in the input (image or audio parts).
	Modalities config.Modality
	// PromptTokens is an estimate of the prompt's size in tokens.
	PromptTokens int64
	// MaxOutputTokens is the requested max_tokens / max_output_tokens (0: not set).
	MaxOutputTokens int64
}

// API is the wire API a request speaks.
type API uint8

const (
	// APIAny: not known (every provider qualifies).
	APIAny API = iota
	// APIOpenAI: OpenAI's Chat Completions, Responses or Embeddings.
	APIOpenAI
	// APIAnthropic: Anthropic's Messages.
	APIAnthropic
)

// Speaks reports whether a provider of kind p serves requests in api as they are: OpenAI,
// Azure OpenAI and OpenAI-compatible servers speak the OpenAI APIs, Anthropic its Messages.
// Until requests are translated (behaviour §13.2) another API is a capability mismatch.
func Speaks(p failure.Provider, api API) bool {
	switch api {
	case APIOpenAI:
		return p == failure.ProviderOpenAI || p == failure.ProviderAzureOpenAI || p == failure.ProviderOpenAICompatible
	case APIAnthropic:
		return p == failure.ProviderAnthropic
	}
	return true
}

// Unmet returns why deployment d cannot keep the contract of a request with these facts, or
// "" when it can. Undeclared capabilities are assumed supported.
func (f Facts) Unmet(d *config.Deployment, stream bool) string {
	c := d.Capabilities
	switch {
	case !Speaks(d.Provider, f.API):
		return "the provider speaks another API"
	case stream && !c.Streaming.Allows():
		return "streaming not supported"
	case f.Tools && !c.Tools.Allows():
		return "tools not supported"
	case f.ParallelToolCalls && !c.ParallelToolCalls.Allows():
		return "parallel tool calls not supported"
	case f.StructuredOutput && !c.StructuredOutput.Allows():
		return "structured output (json_schema) not supported"
	case c.Modalities != 0 && f.Modalities&^c.Modalities != 0:
		return "input modality not supported"
	case c.MaxOutputTokens > 0 && f.MaxOutputTokens > c.MaxOutputTokens:
		return fmt.Sprintf("max output tokens %d above the deployment's %d", f.MaxOutputTokens, c.MaxOutputTokens)
	case c.ContextWindow > 0 && f.PromptTokens+f.MaxOutputTokens > c.ContextWindow:
		return fmt.Sprintf("about %d prompt + %d output tokens exceed the context window of %d", f.PromptTokens, f.MaxOutputTokens, c.ContextWindow)
	}
	return ""
}

// Attempt is the record of one attempt, as the attempt state carries it: how the router
// chose it (Decision.Attempt), then its outcome (Finish).
type Attempt struct {
	Deployment string
	// Model is the public model of the hop the attempt served.
	Model string

	// How it was chosen.
	Move Move
	Pick Pick
	// Probe: the attempt owned its deployment's half-open probe (behaviour §5.4).
	Probe bool
	// AllOpenTry: whenAllOpen "try" ignored open circuits for it (behaviour §7.5).
	AllOpenTry bool
	// FallbackHop: 0 for the requested model, n for the n-th fallback model.
	FallbackHop int
	// Reason is the fallback chain in force when it was chosen; ReasonFrom the model whose
	// refusal chose a context-window or content-policy chain.
	Reason     config.Reason
	ReasonFrom string

	// Its outcome.
	Class      failure.Class
	Kind       failure.Kind
	Quota      bool
	Status     int
	RetryAfter time.Duration
	// RetryAfterHeader: RetryAfter is the provider's own Retry-After (failure.Classification).
	RetryAfterHeader bool
	Latency          time.Duration
	Type             string
	Code             string
	// Message is the provider's sanitised public message.
	Message string
	// ProviderRequestID is the provider's own id of its response, sanitised.
	ProviderRequestID string
}

// Finish records the attempt's outcome: its classification and latency.
func (a *Attempt) Finish(c failure.Classification, latency time.Duration) {
	a.Class, a.Kind, a.Quota, a.Status = c.Class, c.Kind, c.Quota, c.Status
	a.RetryAfter, a.RetryAfterHeader, a.Latency = c.RetryAfter, c.RetryAfterHeader, latency
	a.Type, a.Code, a.Message = c.Type, c.Code, c.Message
}

// Skip records a deployment or fallback model passed over, and why (behaviour §9.2, §4.1).
type Skip struct {
	Deployment string // empty when the whole model was skipped
	Model      string
	Cause      SkipCause
	Why        string
}

// SkipCause is the kind of reason a target was passed over: a small fixed set, so it can
// label a metric.
type SkipCause uint8

const (
	// SkipCapability: the target cannot keep the request's contract (behaviour §9.2).
	SkipCapability SkipCause = iota
	// SkipPolicy: the client key may not use the target's model.
	SkipPolicy
	// SkipLimit: the deployment is at its rpmLimit or tpmLimit this minute (behaviour §4.1).
	SkipLimit
	// SkipUnserved: a fallback model no deployment serves.
	SkipUnserved
)

// SkipCauses lists every cause, in order.
func SkipCauses() []SkipCause {
	return []SkipCause{SkipCapability, SkipPolicy, SkipLimit, SkipUnserved}
}

func (c SkipCause) String() string {
	switch c {
	case SkipPolicy:
		return "policy"
	case SkipLimit:
		return "limit"
	case SkipUnserved:
		return "unserved"
	default:
		return "capability"
	}
}

// History is what happened so far in a logical request.
type History struct {
	Attempts []Attempt
	// Reason is the fallback chain being followed; ReasonFrom the model whose refusal chose a
	// context-window or content-policy chain.
	Reason     config.Reason
	ReasonFrom string
	Skips      []Skip
}

// Last returns the last attempt, or nil.
func (h *History) Last() *Attempt {
	if h == nil || len(h.Attempts) == 0 {
		return nil
	}
	return &h.Attempts[len(h.Attempts)-1]
}

// lastAsked returns the last attempt that reached an upstream's answer (or its transport
// failure): incompatibilities found by the gateway itself do not count.
func (h *History) lastAsked() *Attempt {
	for i := len(h.Attempts) - 1; i >= 0; i-- {
		if h.Attempts[i].Class != failure.ClassIncompatible {
			return &h.Attempts[i]
		}
	}
	return nil
}

// lastOn returns the last attempt on deployment id, or nil.
func (h *History) lastOn(id string) *Attempt {
	for i := len(h.Attempts) - 1; i >= 0; i-- {
		if h.Attempts[i].Deployment == id {
			return &h.Attempts[i]
		}
	}
	return nil
}

// refused reports whether model refused the request itself (a request-class failure): its
// other deployments would refuse it too.
func (h *History) refused(model string) bool {
	for i := range h.Attempts {
		if h.Attempts[i].Model == model && h.Attempts[i].Class == failure.ClassRequest {
			return true
		}
	}
	return false
}

// skipped reports whether skips already record s's target.
func skipped(skips []Skip, s Skip) bool {
	for _, k := range skips {
		if k.Deployment == s.Deployment && k.Model == s.Model {
			return true
		}
	}
	return false
}

// asked counts the attempts that reached an upstream (behaviour §6.4): incompatibilities found by
// the gateway itself spend no budget.
func (h *History) asked() int {
	n := 0
	for i := range h.Attempts {
		if h.Attempts[i].Class != failure.ClassIncompatible {
			n++
		}
	}
	return n
}

// askedOn counts the attempts that reached deployment id's upstream.
func (h *History) askedOn(id string) int {
	n := 0
	for i := range h.Attempts {
		if h.Attempts[i].Deployment == id && h.Attempts[i].Class != failure.ClassIncompatible {
			n++
		}
	}
	return n
}

// Skip appends the skips a decision found.
func (h *History) Skip(skips []Skip) { h.Skips = append(h.Skips, skips...) }

// hopOf is how many models the request moved through to reach model (0: the requested one).
func (h *History) hopOf(model, requested string) int {
	if model == requested {
		return 0
	}
	hop := 0
	for i, a := range h.Attempts {
		if a.Model == requested || h.modelSeen(a.Model, i) {
			if a.Model == model {
				return hop
			}
			continue
		}
		hop++
		if a.Model == model {
			return hop
		}
	}
	return hop + 1
}

// modelSeen reports whether an attempt before the i-th served model.
func (h *History) modelSeen(model string, i int) bool {
	for _, a := range h.Attempts[:i] {
		if a.Model == model {
			return true
		}
	}
	return false
}
