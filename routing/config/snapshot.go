package config

import (
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"

	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Snapshot is a compiled, immutable configuration: what the router reads on every decision.
// Build one with Compile; never mutate it after.
type Snapshot struct {
	Version  uint64
	Settings Settings
	// Deployments by id.
	Deployments map[string]*Deployment
	// Groups by public model (behaviour §1.1).
	Groups map[string]*Group
	// Chains by public model and reason (behaviour §7.6).
	Chains map[ChainKey]*Chain
	// Policies by public model (behaviour §9.3); absent means the defaults.
	Policies map[string]ModelPolicy
	// source is the configuration compiled (a private copy; apiKeys as given), so a replica
	// can put what it serves back into a store that lost it (Guard, Source).
	source *configv1.Config
}

// Models are the public models served, sorted (a stable listing); a nil snapshot serves
// none.
func (s *Snapshot) Models() []string {
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.Groups))
}

// Source returns a copy of the configuration the snapshot was compiled from, with every
// deployment's API key, as a store's ReplaceConfig or RestoreConfig takes it.
func (s *Snapshot) Source() *configv1.Config {
	cfg := proto.CloneOf(s.source)
	if cfg == nil {
		cfg = &configv1.Config{}
	}
	for _, d := range cfg.GetDeployments() {
		if c := s.Deployments[d.GetId()]; c != nil && c.APIKey != "" {
			d.ApiKey = c.APIKey
		}
	}
	return cfg
}

// Settings are the router settings in force, typed.
type Settings struct {
	Strategy    Strategy
	Circuit     store.CircuitSettings
	RetryAfter  time.Duration // retryAfterSeconds: floor of any reuse wait (behaviour §7.2)
	WhenAllOpen WhenAllOpen
	// Policies is the execution-policy matrix, by operation and mode.
	Policies          [numOperations][numModes]Policy
	IdempotencyKeyTTL time.Duration
}

// Policy returns the global policy of an operation and mode.
func (s *Settings) Policy(o Operation, m Mode) Policy {
	return s.Policies[o][o.Cell(m)]
}

// WhenAllOpen is the behaviour §7.5 choice when every circuit of a group is open.
type WhenAllOpen uint8

const (
	// WhenAllOpenReject answers 503 model_overloaded (the default, seed 000).
	WhenAllOpenReject WhenAllOpen = iota
	// WhenAllOpenTry tries the group anyway (seed 001's behaviour, opt-in).
	WhenAllOpenTry
)

// Group is the deployments serving one public model.
type Group struct {
	Model       string
	Deployments []*Deployment
	// Refs[i] is the store reference of Deployments[i], precomputed for ReadStates.
	Refs []store.DeploymentRef
}

// Deployment is one compiled deployment.
type Deployment struct {
	ID            string
	PublicModel   string
	Provider      failure.Provider
	BaseURL       string
	ProviderModel string
	APIKey        string
	APIVersion    string
	Weight        uint32
	RPMLimit      int64 // 0: none
	TPMLimit      int64 // 0: none
	// Domain is the effective failure domain (store.DomainOf).
	Domain       string
	Price        Price
	Overrides    [numOperations][numModes]Override
	Capabilities Capabilities
	Enabled      bool
}

// Ref is the deployment's store reference.
func (d *Deployment) Ref() store.DeploymentRef {
	return store.DeploymentRef{ID: d.ID, Domain: d.Domain}
}

// Policy is the policy for an attempt on d: the global one lowered by d's overrides.
func (d *Deployment) Policy(s *Settings, o Operation, m Mode) Policy {
	return d.Overrides[o][o.Cell(m)].Apply(s.Policy(o, m))
}

// Total is the total time attempts on d may use for o/m: the global totalMs, or d's lower
// override. It is Policy(s, o, m).Total without building the whole policy.
func (d *Deployment) Total(s *Settings, o Operation, m Mode) time.Duration {
	return lower(s.Policy(o, m).Total, d.Overrides[o][o.Cell(m)].Total)
}

// MaxAttempts is the most attempts on d within one request for o/m (0: no own limit).
func (d *Deployment) MaxAttempts(o Operation, m Mode) int {
	return d.Overrides[o][o.Cell(m)].MaxAttempts
}

// PriceBasis is how a deployment bills (behaviour §2.4).
type PriceBasis uint8

const (
	PriceUnknown PriceBasis = iota
	PriceTokens
	PriceSearchUnits
)

// Price is a deployment's comparable price. For token billing the comparable rate is
// inputPerMillion + outputPerMillion, the price of one million input plus one million output
// tokens (behaviour §2.4 asks for one documented definition); for search billing it is
// searchUnitCents.
type Price struct {
	Basis PriceBasis
	Rate  float64
}

// Support says whether a deployment declared a capability.
type Support uint8

const (
	// SupportUndeclared: not declared, treated as supported.
	SupportUndeclared Support = iota
	SupportYes
	SupportNo
)

// Allows reports whether the capability may be used.
func (s Support) Allows() bool { return s != SupportNo }

// Modality is a set of input modalities.
type Modality uint8

const (
	ModalityText Modality = 1 << iota
	ModalityImage
	ModalityAudio
)

// Capabilities are what a deployment declared (behaviour §9.1). Undeclared means supported.
type Capabilities struct {
	// Modalities declared; 0 means undeclared (any).
	Modalities        Modality
	Streaming         Support
	Tools             Support
	ParallelToolCalls Support
	StructuredOutput  Support
	ContextWindow     int64 // tokens; 0 undeclared
	MaxOutputTokens   int64 // 0 undeclared
}

// ChainKey identifies a fallback chain.
type ChainKey struct {
	Model  string
	Reason Reason
}

// Chain is a compiled fallback chain.
type Chain struct {
	Targets []string
	Enabled bool
}

// Reason is why a fallback chain is followed (behaviour §7.6).
type Reason uint8

const (
	ReasonGeneral Reason = iota
	ReasonContextWindow
	ReasonContentPolicy
)

func (r Reason) String() string {
	switch r {
	case ReasonContextWindow:
		return "context_window"
	case ReasonContentPolicy:
		return "content_policy"
	default:
		return "general"
	}
}

// ParseReason maps a chain's reason field to its Reason.
func ParseReason(s string) (Reason, bool) {
	switch s {
	case "general":
		return ReasonGeneral, true
	case "context_window":
		return ReasonContextWindow, true
	case "content_policy":
		return ReasonContentPolicy, true
	}
	return 0, false
}

// ModelPolicy is a public model's failover/fallback policy (behaviour §9.3).
type ModelPolicy struct {
	SameModelFailoverFirst    bool
	CrossModelFallbackAllowed bool
}

// DefaultModelPolicy is the policy of a model without one.
func DefaultModelPolicy() ModelPolicy {
	return ModelPolicy{SameModelFailoverFirst: true, CrossModelFallbackAllowed: true}
}

// Policy returns the policy of a public model.
func (s *Snapshot) Policy(model string) ModelPolicy {
	if p, ok := s.Policies[model]; ok {
		return p
	}
	return DefaultModelPolicy()
}
