package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// LoadFile reads an Envoy bootstrap (YAML or JSON) from path; see Load.
func LoadFile(path string) (*bootstrapv3.Bootstrap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("envoysim: read bootstrap: %w", err)
	}
	bs, err := Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return bs, nil
}

// Load parses an Envoy v3 bootstrap the way Envoy does (YAML → JSON → protobuf JSON
// mapping, source/common/protobuf/utility.cc loadFromYaml), resolving typed_config
// Any types from the go-control-plane registry; unknown fields are errors. It then
// runs the protoc-gen-validate rules Envoy enforces and envoysim's allow-list, so any
// field envoysim does not implement is rejected with its name.
func Load(data []byte) (*bootstrapv3.Bootstrap, error) {
	js, err := yamlToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("envoysim: bootstrap yaml: %w", err)
	}
	bs := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, bs); err != nil {
		return nil, fmt.Errorf("envoysim: bootstrap: %w", err)
	}
	if err := validateResource(bs, ""); err != nil {
		return nil, fmt.Errorf("envoysim: bootstrap: %w", err)
	}
	return bs, nil
}

// validateResource applies Envoy's PGV validation and envoysim's allow-list to a
// bootstrap or an xDS resource.
func validateResource(m proto.Message, path string) error {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("invalid %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	return walkSupported(m.ProtoReflect(), path)
}

func yamlToJSON(data []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	v, err := jsonable(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func jsonable(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			x[k] = j
		}
		return x, nil
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			m[fmt.Sprint(k)] = j
		}
		return m, nil
	case []any:
		for i, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			x[i] = j
		}
		return x, nil
	}
	return v, nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// walkSupported rejects every populated field that is not in supportedFields and every
// typed_config whose type is not in supportedTypes.
func walkSupported(m protoreflect.Message, path string) error {
	name := string(m.Descriptor().FullName())
	if freeFormTypes[name] {
		return nil
	}
	if name == "google.protobuf.Any" {
		return walkAny(m.Interface().(*anypb.Any), path)
	}
	type field struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var fields []field
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fields = append(fields, field{fd, v})
		return true
	})
	slices.SortFunc(fields, func(a, b field) int { return int(a.fd.Number()) - int(b.fd.Number()) })
	for _, f := range fields {
		fd, v := f.fd, f.v
		fp := joinPath(path, string(fd.Name()))
		if !supportedFields[string(fd.FullName())] {
			return fmt.Errorf("%s: field %s is not supported by envoysim (see e2e/envoysim/README.md)", fp, fd.FullName())
		}
		switch {
		case fd.IsList():
			if fd.Kind() != protoreflect.MessageKind {
				continue
			}
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				if err := walkSupported(l.Get(i).Message(), fmt.Sprintf("%s[%d]", fp, i)); err != nil {
					return err
				}
			}
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				continue
			}
			var err error
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				kp := fmt.Sprintf("%s[%q]", fp, k.String())
				if fd.FullName() == "envoy.config.cluster.v3.Cluster.typed_extension_protocol_options" &&
					k.String() != "envoy.extensions.upstreams.http.v3.HttpProtocolOptions" {
					err = fmt.Errorf("%s: protocol options %q are not supported by envoysim", kp, k.String())
					return false
				}
				err = walkSupported(mv.Message(), kp)
				return err == nil
			})
			if err != nil {
				return err
			}
		case fd.Kind() == protoreflect.MessageKind:
			if err := walkSupported(v.Message(), fp); err != nil {
				return err
			}
		}
	}
	return nil
}

// typeName is the message name of an Any type URL.
func typeName(url string) string {
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		return url[i+1:]
	}
	return url
}

func walkAny(a *anypb.Any, path string) error {
	tn := typeName(a.GetTypeUrl())
	if !supportedTypes[tn] {
		return fmt.Errorf("%s: extension type %s is not supported by envoysim", path, tn)
	}
	msg, err := a.UnmarshalNew()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if v, ok := msg.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%s: invalid %s: %w", path, tn, err)
		}
	}
	if delegatedTypes[tn] {
		return nil
	}
	return walkSupported(msg.ProtoReflect(), path)
}
