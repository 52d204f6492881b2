package admin

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// apiKeySetField is the field a deployment's JSON carries instead of its key (behaviour §11.3:
// credentials are write-only; a GET shows whether one is set).
const apiKeySetField = "apiKeySet"

// protoJSON renders m with the schema's JSON names.
func protoJSON(m proto.Message) (json.RawMessage, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return b, nil
}

// deploymentView renders a deployment without its key (whatever d carries) and with
// apiKeySet, and always with enabled: an absent one means true (config.Compile), which a
// reader should not have to know.
func deploymentView(d *configv1.Deployment, keySet bool) (json.RawMessage, error) {
	d = proto.CloneOf(d)
	d.ApiKey = ""
	if d.Enabled == nil {
		d.Enabled = proto.Bool(true)
	}
	b, err := protoJSON(d)
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("re-reading deployment %q: %w", d.GetId(), err)
	}
	obj[apiKeySetField] = json.RawMessage(fmt.Sprint(keySet))
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding deployment %q: %w", d.GetId(), err)
	}
	return out, nil
}

// list is the body of a collection GET.
func list(items []json.RawMessage) map[string]any {
	if items == nil {
		items = []json.RawMessage{}
	}
	return map[string]any{"object": "list", "data": items}
}

// protoList renders messages for list.
func protoList[M proto.Message](ms []M) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(ms))
	for _, m := range ms {
		b, err := protoJSON(m)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
