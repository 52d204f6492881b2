package ads

import (
	"errors"
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// decode turns the Any resources of resp into typed messages. Any failure NACKs the
// whole response, as in Envoy, where a decode exception rejects the update:
//   - a resource whose type URL differs from the response's type URL ("... does not
//     match the message-wide type URL ..." in GrpcMuxImpl::onDiscoveryResponse);
//   - bytes that do not parse as that type.
//
// Resources wrapped in an envoy.service.discovery.v3.Resource envelope are unwrapped.
// An envelope without a body is a TTL heartbeat: it refreshes a TTL and carries no
// state. A response made only of heartbeats reports heartbeatOnly and is ACKed
// without calling the handler; a response mixing heartbeats with resources is
// rejected because a state-of-the-world handler would read the missing bodies as
// deletions, and envoysim does not model resource TTLs.
func decode[T proto.Message](resp *discoveryv3.DiscoveryResponse, newT func() T) (out []T, heartbeatOnly bool, err error) {
	typeURL := resp.GetTypeUrl()
	heartbeats := 0
	for i, res := range resp.GetResources() {
		body := res
		if res.GetTypeUrl() == resourceWrapperType {
			wrapper := &discoveryv3.Resource{}
			if err := proto.Unmarshal(res.GetValue(), wrapper); err != nil {
				return nil, false, fmt.Errorf("resource %d: decode %s envelope: %w", i, resourceWrapperType, err)
			}
			if wrapper.GetResource() == nil {
				heartbeats++
				continue
			}
			body = wrapper.GetResource()
		}
		if body.GetTypeUrl() != typeURL {
			return nil, false, fmt.Errorf("resource %d: type URL %q does not match the response type URL %q",
				i, body.GetTypeUrl(), typeURL)
		}
		msg := newT()
		if err := proto.Unmarshal(body.GetValue(), msg); err != nil {
			return nil, false, fmt.Errorf("resource %d: decode %s: %w", i, typeURL, err)
		}
		out = append(out, msg)
	}
	if heartbeats > 0 {
		if len(out) > 0 {
			return nil, false, errors.New("response mixes TTL heartbeats with resources; envoysim does not support resource TTLs")
		}
		return nil, true, nil
	}
	return out, false, nil
}
