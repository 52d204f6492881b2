package attemptstate

import (
	"fmt"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// The proto enums are the routing values plus one (zero is "unspecified"), so a conversion is
// an offset and a range check; a state that fails the check was sealed by an incompatible
// replica.

func reasonOf(r statev1.FallbackReason) (config.Reason, error) {
	if r < statev1.FallbackReason_FALLBACK_REASON_GENERAL || r > statev1.FallbackReason_FALLBACK_REASON_CONTENT_POLICY {
		return 0, fmt.Errorf("attempt state: fallback reason %d out of range", r)
	}
	return config.Reason(r - 1), nil
}

// reasonOrGeneral reads how an attempt was chosen, which only informs the record.
func reasonOrGeneral(r statev1.FallbackReason) config.Reason {
	reason, err := reasonOf(r)
	if err != nil {
		return config.ReasonGeneral
	}
	return reason
}

func moveOf(m statev1.Move) routing.Move { return routing.Move(max(m, 1) - 1) }

// pickOf reads routing.Pick's name, as the state keeps it.
func pickOf(s string) routing.Pick {
	for p := routing.PickNone; p <= routing.PickWeighted; p++ {
		if p.String() == s {
			return p
		}
	}
	return routing.PickNone
}

// dialects pairs each client dialect with its name in the state.
var dialects = [...]struct {
	d dialect.Dialect
	p statev1.Dialect
}{
	{dialect.Chat, statev1.Dialect_DIALECT_OPENAI_CHAT},
	{dialect.Responses, statev1.Dialect_DIALECT_OPENAI_RESPONSES},
	{dialect.Messages, statev1.Dialect_DIALECT_ANTHROPIC_MESSAGES},
	{dialect.Embeddings, statev1.Dialect_DIALECT_OPENAI_EMBEDDINGS},
}

func dialectProto(d dialect.Dialect) statev1.Dialect {
	for _, x := range dialects {
		if x.d == d {
			return x.p
		}
	}
	return statev1.Dialect_DIALECT_UNSPECIFIED
}

func dialectOf(d statev1.Dialect) dialect.Dialect {
	for _, x := range dialects {
		if x.p == d {
			return x.d
		}
	}
	return dialect.None
}

func skipProto(s routing.Skip) *statev1.Skip {
	return &statev1.Skip{DeploymentId: s.Deployment, Model: s.Model, Reason: s.Why, Cause: statev1.SkipCause(s.Cause) + 1}
}

// skipOf reads a skip; a state sealed before skips had causes only held capability skips.
func skipOf(s *statev1.Skip) routing.Skip {
	cause := routing.SkipCapability
	if c := s.Cause; c > statev1.SkipCause_SKIP_CAUSE_UNSPECIFIED && c <= statev1.SkipCause_SKIP_CAUSE_UNSERVED {
		cause = routing.SkipCause(c - 1)
	}
	return routing.Skip{Deployment: s.DeploymentId, Model: s.Model, Cause: cause, Why: s.Reason}
}
