package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"buf.build/go/protovalidate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// FieldError is one invalid field: Field is the JSON path with docs/behaviour.md's camelCase names
// (e.g. `deployments[2].weight`), so an admin API 400 can name it (behaviour §11.1).
type FieldError struct {
	Field   string
	Message string
}

func (e FieldError) String() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// ValidationError lists every invalid field of a configuration.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.String()
	}
	return "invalid configuration: " + strings.Join(parts, "; ")
}

func (e *ValidationError) add(field, format string, args ...any) {
	e.Errors = append(e.Errors, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Validator checks configurations: the per-field rules declared in the proto schema
// (protovalidate) and the rules that span objects (a complete execution-policy matrix,
// overrides that only lower, unique ids).
type Validator struct {
	pv protovalidate.Validator
}

// NewValidator builds a validator. Build one and reuse it: rule programs are compiled and
// cached on first use.
func NewValidator() (*Validator, error) {
	pv, err := protovalidate.New()
	if err != nil {
		return nil, fmt.Errorf("building protovalidate validator: %w", err)
	}
	return &Validator{pv: pv}, nil
}

// Config validates a whole configuration. It returns a *ValidationError naming every
// invalid field, or nil.
func (v *Validator) Config(cfg *configv1.Config) error { return v.config(cfg, true) }

// Stored validates a configuration read from the store, or one an admin write is about to
// store, as Config does but without the per-deployment endpoint rules (checkDeployment):
// a stored deployment that breaks them (written by an older release, or straight into the
// store) must not freeze every later version; xds leaves it out of the snapshot instead.
// New deployments pass Message, which applies those rules.
func (v *Validator) Stored(cfg *configv1.Config) error { return v.config(cfg, false) }

func (v *Validator) config(cfg *configv1.Config, endpoints bool) error {
	ve := &ValidationError{}
	v.schema(ve, "", cfg)
	checkSettings(ve, cfg.GetRouterSettings())
	global := EffectiveSettings(cfg.GetRouterSettings()).GetExecutionPolicies()

	ids := make(map[string]int)
	for i, d := range cfg.GetDeployments() {
		path := fmt.Sprintf("deployments[%d]", i)
		if j, dup := ids[d.GetId()]; dup {
			ve.add(path+".id", "duplicate deployment id %q (also deployments[%d])", d.GetId(), j)
		}
		ids[d.GetId()] = i
		if endpoints {
			checkDeployment(ve, path, d)
		}
		checkOverrides(ve, path+".executionPolicyOverrides", d.GetExecutionPolicyOverrides(), global)
	}
	chains := make(map[string]int)
	for i, c := range cfg.GetFallbackChains() {
		key := c.GetPublicModel() + "\x00" + c.GetReason()
		if j, dup := chains[key]; dup {
			ve.add(fmt.Sprintf("fallbackChains[%d]", i), "duplicate chain for publicModel %q and reason %q (also fallbackChains[%d])", c.GetPublicModel(), c.GetReason(), j)
		}
		chains[key] = i
	}
	policies := make(map[string]int)
	for i, p := range cfg.GetModelPolicies() {
		if j, dup := policies[p.GetPublicModel()]; dup {
			ve.add(fmt.Sprintf("modelPolicies[%d].publicModel", i), "duplicate policy for %q (also modelPolicies[%d])", p.GetPublicModel(), j)
		}
		policies[p.GetPublicModel()] = i
	}
	if len(ve.Errors) > 0 {
		return ve
	}
	return nil
}

// Message validates one message against its schema rules only (a deployment, a chain or a
// settings patch as received by the admin API); prefix is its JSON path.
func (v *Validator) Message(prefix string, m proto.Message) error {
	ve := &ValidationError{}
	v.schema(ve, prefix, m)
	switch m := m.(type) {
	case *configv1.RouterSettings:
		checkSettingsWithPrefix(ve, prefix, m)
	case *configv1.Deployment:
		checkDeployment(ve, prefix, m)
	}
	if len(ve.Errors) > 0 {
		return ve
	}
	return nil
}

// schema runs the protovalidate rules and converts violations to camelCase paths.
func (v *Validator) schema(ve *ValidationError, prefix string, m proto.Message) {
	err := v.pv.Validate(m)
	if err == nil {
		return
	}
	var pve *protovalidate.ValidationError
	if !errors.As(err, &pve) {
		ve.add(prefix, "%v", err)
		return
	}
	root := m.ProtoReflect().Descriptor()
	for _, viol := range pve.Violations {
		field := jsonPath(root, viol)
		if prefix != "" {
			if field != "" {
				field = prefix + "." + field
			} else {
				field = prefix
			}
		}
		msg := viol.Proto.GetMessage()
		if msg == "" {
			msg = viol.Proto.GetRuleId()
		}
		ve.add(field, "%s", msg)
	}
}

// jsonPath renders a violation's field path with the JSON names protobuf reflection gives
// (FieldDescriptor.JSONName), walking the descriptors from root, the validated message.
func jsonPath(root protoreflect.MessageDescriptor, viol *protovalidate.Violation) string {
	var b strings.Builder
	md := root
	for i, el := range viol.Proto.GetField().GetElements() {
		if i > 0 {
			b.WriteByte('.')
		}
		var fd protoreflect.FieldDescriptor
		if md != nil {
			fd = md.Fields().ByNumber(protoreflect.FieldNumber(el.GetFieldNumber()))
		}
		md = nil
		if fd == nil {
			// Not a field of the schema we walk (an extension): its own name is all we have.
			b.WriteString(el.GetFieldName())
		} else {
			b.WriteString(fd.JSONName())
			if fd.IsMap() {
				md = fd.MapValue().Message()
			} else {
				md = fd.Message()
			}
		}
		switch {
		case el.HasIndex():
			b.WriteString("[" + strconv.FormatUint(el.GetIndex(), 10) + "]")
		case el.HasStringKey():
			b.WriteString("[" + strconv.Quote(el.GetStringKey()) + "]")
		}
	}
	return b.String()
}

func checkSettings(ve *ValidationError, rs *configv1.RouterSettings) {
	checkSettingsWithPrefix(ve, "routerSettings", rs)
}

// checkSettingsWithPrefix enforces the exhaustive matrix (behaviour §6.3): when
// executionPolicies is sent, every operation must be there with every mode it has, and
// each cell complete.
func checkSettingsWithPrefix(ve *ValidationError, prefix string, rs *configv1.RouterSettings) {
	eps := rs.GetExecutionPolicies()
	if len(eps) == 0 {
		return
	}
	base := join(prefix, "executionPolicies")
	for _, o := range Operations() {
		op, ok := eps[o.String()]
		if !ok {
			ve.add(base, "operation %q has no policy; executionPolicies must hold the whole matrix (as GET returns it)", o.String())
			continue
		}
		for _, m := range []Mode{ModeJSON, ModeStream} {
			cell := cellOf(op, m)
			path := fmt.Sprintf("%s[%q].%s", base, o.String(), m)
			switch {
			case !o.HasMode(m) && cell != nil:
				ve.add(path, "operation %q has no %s mode", o.String(), m)
			case o.HasMode(m) && cell == nil:
				ve.add(path, "missing: operation %q needs a %s policy", o.String(), m)
			case cell != nil:
				checkCell(ve, path, cell, m)
			}
		}
	}
}

func checkCell(ve *ValidationError, path string, ep *configv1.ExecutionPolicy, m Mode) {
	if ep.ResponseMs == nil {
		ve.add(path+".responseMs", "required")
	}
	if ep.TotalMs == nil {
		ve.add(path+".totalMs", "required")
	}
	if ep.MaxAttempts == nil {
		ve.add(path+".maxAttempts", "required")
	}
	if m == ModeJSON && ep.IdleMs != nil {
		ve.add(path+".idleMs", "idleMs applies to streams only")
	}
	if ep.ResponseMs != nil && ep.TotalMs != nil && ep.GetResponseMs() > ep.GetTotalMs() {
		ve.add(path+".responseMs", "responseMs %d exceeds totalMs %d", ep.GetResponseMs(), ep.GetTotalMs())
	}
}

// checkOverrides enforces behaviour §6.3: a deployment's overrides may only lower the global
// values.
func checkOverrides(ve *ValidationError, base string, overrides, global map[string]*configv1.OperationPolicy) {
	for name, op := range overrides {
		o, ok := ParseOperation(name)
		if !ok {
			continue // the schema rule on map keys already reported it
		}
		for _, m := range []Mode{ModeJSON, ModeStream} {
			cell := cellOf(op, m)
			if cell == nil {
				continue
			}
			path := fmt.Sprintf("%s[%q].%s", base, name, m)
			if !o.HasMode(m) {
				ve.add(path, "operation %q has no %s mode", name, m)
				continue
			}
			g := cellOf(global[name], m)
			if m == ModeJSON && cell.IdleMs != nil {
				ve.add(path+".idleMs", "idleMs applies to streams only")
			}
			lowerOnly(ve, path+".responseMs", cell.ResponseMs, g.ResponseMs)
			lowerOnly(ve, path+".idleMs", cell.IdleMs, g.IdleMs)
			lowerOnly(ve, path+".totalMs", cell.TotalMs, g.TotalMs)
			if cell.MaxAttempts != nil && g.MaxAttempts != nil && cell.GetMaxAttempts() > g.GetMaxAttempts() {
				ve.add(path+".maxAttempts", "override %d raises the global %d; overrides may only lower", cell.GetMaxAttempts(), g.GetMaxAttempts())
			}
		}
	}
}

func lowerOnly(ve *ValidationError, path string, override, global *uint64) {
	// A null global (idleMs disabled) is no limit: any override lowers it.
	if override != nil && global != nil && *override > *global {
		ve.add(path, "override %d raises the global %d; overrides may only lower", *override, *global)
	}
}

func cellOf(op *configv1.OperationPolicy, m Mode) *configv1.ExecutionPolicy {
	if m == ModeStream {
		return op.GetStream()
	}
	return op.GetJson()
}

func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}
