package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// DecodeEach decodes a configuration file element by element (each top-level field, each
// element of a list) so that one element that does not decode hides none of the others'
// errors (`switchyard validate` reports them all). It returns what decoded, with an empty
// element in place of each one that did not (indexes keep their meaning), and the paths of
// those (failed). err is set only when the file is not a configuration object at all.
func DecodeEach(name string, data []byte) (cfg *configv1.Config, failed []FieldError, err error) {
	j, err := fileJSON(name, data)
	if err != nil {
		return nil, nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(j, &top); err != nil {
		return nil, nil, fmt.Errorf("decoding configuration: must be a JSON or YAML object: %w", err)
	}
	cfg = &configv1.Config{}
	fields := cfg.ProtoReflect().Descriptor().Fields()
	for key, raw := range top {
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key) // protojson also takes the proto name
		}
		if fd == nil {
			failed = append(failed, FieldError{Field: key, Message: "unknown field"})
			continue
		}
		if fd.IsList() && fd.Message() != nil {
			var elems []json.RawMessage
			if json.Unmarshal(raw, &elems) == nil {
				list := cfg.ProtoReflect().Mutable(fd).List()
				for i, e := range elems {
					m := list.NewElement()
					if err := protojson.Unmarshal(e, m.Message().Interface()); err != nil {
						failed = append(failed, FieldError{Field: fmt.Sprintf("%s[%d]", key, i), Message: decodeMessage(err)})
						m = list.NewElement() // empty: its index stays
					}
					list.Append(m)
				}
				continue
			}
		}
		one, _ := json.Marshal(map[string]json.RawMessage{key: raw})
		part := &configv1.Config{}
		if err := protojson.Unmarshal(one, part); err != nil {
			failed = append(failed, FieldError{Field: key, Message: decodeMessage(err)})
			continue
		}
		proto.Merge(cfg, part)
	}
	return cfg, failed, nil
}

// decodeMessage is protojson's message without its position (`proto: (line 1:2): `), which
// refers to the element alone.
func decodeMessage(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "): "); ok {
		return after
	}
	return msg
}

// under reports whether field is path or inside it.
func under(field, path string) bool {
	return field == path || strings.HasPrefix(field, path+".") || strings.HasPrefix(field, path+"[")
}

// CheckFile is every error of a configuration file, for `switchyard validate`: the elements
// that do not decode (DecodeEach), the validation errors of the rest (Validator.Config;
// none reported inside an element that did not decode), and the chains and policies naming
// a model no deployment serves (UnknownModels). It returns the configuration as decoded and
// nil when there is no error, or a *ValidationError.
func CheckFile(name string, data []byte, v *Validator) (*configv1.Config, error) {
	cfg, failed, err := DecodeEach(name, data)
	if err != nil {
		return nil, err
	}
	ve := &ValidationError{Errors: failed}
	var vve *ValidationError
	if err := v.Config(cfg); err != nil {
		if !errors.As(err, &vve) {
			return nil, err
		}
	next:
		for _, fe := range vve.Errors {
			for _, f := range failed {
				if under(fe.Field, f.Field) {
					continue next
				}
			}
			ve.Errors = append(ve.Errors, fe)
		}
	}
	ve.Errors = append(ve.Errors, UnknownModels(cfg)...)
	if len(ve.Errors) > 0 {
		slices.SortStableFunc(ve.Errors, func(a, b FieldError) int { return strings.Compare(a.Field, b.Field) })
		return cfg, ve
	}
	return cfg, nil
}
