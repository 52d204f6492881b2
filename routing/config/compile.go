package config

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Compile turns a validated configuration into the immutable Snapshot the router reads.
// secrets maps deployment id to API key (see store.ConfigSnapshot).
func Compile(version uint64, cfg *configv1.Config, secrets map[string]string) (*Snapshot, error) {
	settings, err := compileSettings(EffectiveSettings(cfg.GetRouterSettings()))
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{
		Version:     version,
		Settings:    settings,
		Deployments: make(map[string]*Deployment, len(cfg.GetDeployments())),
		Groups:      make(map[string]*Group),
		Chains:      make(map[ChainKey]*Chain, len(cfg.GetFallbackChains())),
		Policies:    make(map[string]ModelPolicy, len(cfg.GetModelPolicies())),
		source:      proto.CloneOf(cfg),
	}
	for _, src := range cfg.GetDeployments() {
		d := compileDeployment(src, secrets[src.GetId()])
		g := snap.Groups[d.PublicModel]
		if g == nil {
			g = &Group{Model: d.PublicModel}
			snap.Groups[d.PublicModel] = g
		}
		g.Deployments = append(g.Deployments, d)
		g.Refs = append(g.Refs, d.Ref())
		snap.Deployments[d.ID] = d
	}
	for _, c := range cfg.GetFallbackChains() {
		reason, ok := ParseReason(c.GetReason())
		if !ok {
			return nil, fmt.Errorf("fallback chain of %q: unknown reason %q", c.GetPublicModel(), c.GetReason())
		}
		snap.Chains[ChainKey{Model: c.GetPublicModel(), Reason: reason}] = &Chain{
			Targets: append([]string(nil), c.GetTargets()...),
			Enabled: c.Enabled == nil || c.GetEnabled(),
		}
	}
	for _, p := range cfg.GetModelPolicies() {
		mp := DefaultModelPolicy()
		if p.SameModelFailoverFirst != nil {
			mp.SameModelFailoverFirst = p.GetSameModelFailoverFirst()
		}
		if p.CrossModelFallbackAllowed != nil {
			mp.CrossModelFallbackAllowed = p.GetCrossModelFallbackAllowed()
		}
		snap.Policies[p.GetPublicModel()] = mp
	}
	return snap, nil
}

func compileSettings(rs *configv1.RouterSettings) (Settings, error) {
	strategy, ok := ParseStrategy(rs.GetRoutingStrategy())
	if !ok {
		return Settings{}, fmt.Errorf("unknown routingStrategy %q", rs.GetRoutingStrategy())
	}
	sec := func(v uint32) time.Duration { return time.Duration(v) * time.Second }
	s := Settings{
		Strategy: strategy,
		Circuit: store.CircuitSettings{
			AllowedFails:          rs.GetAllowedFails(),
			Cooldown:              sec(rs.GetCooldownSeconds()),
			FailureWindow:         sec(rs.GetFailureWindowSeconds()),
			MaxCooldown:           sec(rs.GetMaxCooldownSeconds()),
			HalfOpenProbe:         sec(rs.GetHalfOpenProbeSeconds()),
			ConfigurationCooldown: sec(rs.GetConfigurationCooldownSeconds()),
			ThrottleCooldown:      sec(rs.GetThrottleCooldownSeconds()),
		},
		RetryAfter:        sec(rs.GetRetryAfterSeconds()),
		IdempotencyKeyTTL: sec(rs.GetIdempotencyKeyTtlSeconds()),
	}
	if rs.GetWhenAllOpen() == "try" {
		s.WhenAllOpen = WhenAllOpenTry
	}
	for _, o := range Operations() {
		for _, m := range []Mode{ModeJSON, ModeStream} {
			if !o.HasMode(m) {
				continue
			}
			if cell := cellOf(rs.GetExecutionPolicies()[o.String()], m); cell != nil {
				s.Policies[o][m] = policyFromProto(cell)
			} else {
				s.Policies[o][m] = DefaultPolicy(o, m)
			}
		}
	}
	return s, nil
}

func compileDeployment(src *configv1.Deployment, apiKey string) *Deployment {
	d := &Deployment{
		ID:            src.GetId(),
		PublicModel:   src.GetPublicModel(),
		Provider:      failure.Provider(src.GetProvider()),
		BaseURL:       src.GetBaseUrl(),
		ProviderModel: src.GetProviderModel(),
		APIKey:        apiKey,
		APIVersion:    src.GetApiVersion(),
		Weight:        1,
		RPMLimit:      int64(src.GetRpmLimit()),
		TPMLimit:      int64(src.GetTpmLimit()),
		Domain:        store.DomainOf(src.GetId(), src.GetFailureDomain()),
		Price:         compilePrice(src.GetPrice()),
		Capabilities:  compileCapabilities(src.GetCapabilities()),
		Enabled:       src.Enabled == nil || src.GetEnabled(),
	}
	if src.Weight != nil {
		d.Weight = src.GetWeight()
	}
	for name, op := range src.GetExecutionPolicyOverrides() {
		o, ok := ParseOperation(name)
		if !ok {
			continue
		}
		d.Overrides[o][ModeJSON] = Override(policyFromProto(op.GetJson()))
		d.Overrides[o][ModeStream] = Override(policyFromProto(op.GetStream()))
	}
	return d
}

func compilePrice(p *configv1.Price) Price {
	if p == nil {
		return Price{}
	}
	switch {
	case p.InputPerMillion != nil && p.OutputPerMillion != nil:
		return Price{Basis: PriceTokens, Rate: p.GetInputPerMillion() + p.GetOutputPerMillion()}
	case p.SearchUnitCents != nil:
		return Price{Basis: PriceSearchUnits, Rate: p.GetSearchUnitCents()}
	default:
		return Price{}
	}
}

func compileCapabilities(c *configv1.Capabilities) Capabilities {
	if c == nil {
		return Capabilities{}
	}
	support := func(b *bool) Support {
		switch {
		case b == nil:
			return SupportUndeclared
		case *b:
			return SupportYes
		default:
			return SupportNo
		}
	}
	out := Capabilities{
		Streaming:         support(c.Streaming),
		Tools:             support(c.Tools),
		ParallelToolCalls: support(c.ParallelToolCalls),
		StructuredOutput:  support(c.StructuredOutput),
		ContextWindow:     int64(c.GetContextWindow()),
		MaxOutputTokens:   int64(c.GetMaxOutputTokens()),
	}
	for _, m := range c.GetModalities() {
		switch m {
		case "text":
			out.Modalities |= ModalityText
		case "image":
			out.Modalities |= ModalityImage
		case "audio":
			out.Modalities |= ModalityAudio
		}
	}
	return out
}
