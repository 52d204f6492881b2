package sim

import (
	"fmt"

	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/extproc"
)

const (
	typeExtProc       = "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
	typeRouter        = "envoy.extensions.filters.http.router.v3.Router"
	typeUpstreamCodec = "envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec"
)

// httpFilter is a compiled non-terminal HTTP filter (only ext_proc is implemented).
type httpFilter struct {
	name    string
	extproc *extproc.Config
}

// routerConfig is the compiled router filter.
type routerConfig struct {
	suppressEnvoyHeaders bool
	// upstreamFilters are Router.upstream_http_filters (without upstream_codec), used
	// for clusters that configure none (HttpProtocolOptions.http_filters wins).
	upstreamFilters []*httpFilter
}

// compileHTTPFilters compiles an HTTP filter chain. Envoy requires the terminal filter
// last (FilterChainUtility / FilterChainHelper::processFilters: "terminal filter
// named ... must be the last filter"): the router downstream, upstream_codec
// upstream. The terminal filter is dropped from the result.
func (s *Sim) compileHTTPFilters(list []*hcmv3.HttpFilter, upstream bool) ([]*httpFilter, error) {
	terminal := typeRouter
	if upstream {
		terminal = typeUpstreamCodec
	}
	var out []*httpFilter
	for i, f := range list {
		tn := typeName(f.GetTypedConfig().GetTypeUrl())
		last := i == len(list)-1
		switch {
		case tn == terminal && !last:
			return nil, fmt.Errorf("http filter %q: terminal filter %s must be the last filter in a http filter chain", f.GetName(), tn)
		case tn != terminal && last:
			return nil, fmt.Errorf("http filter %q: non-terminal filter %s is the last filter in a http filter chain", f.GetName(), tn)
		case tn == terminal:
			continue
		case tn == typeExtProc:
			msg, err := f.GetTypedConfig().UnmarshalNew()
			if err != nil {
				return nil, fmt.Errorf("http filter %q: %w", f.GetName(), err)
			}
			cfg, err := extproc.NewConfig(msg.(*epv3.ExternalProcessor))
			if err != nil {
				return nil, fmt.Errorf("http filter %q: %w", f.GetName(), err)
			}
			out = append(out, &httpFilter{name: f.GetName(), extproc: cfg})
		default:
			where := "downstream"
			if upstream {
				where = "upstream"
			}
			return nil, fmt.Errorf("http filter %q: %s is not supported by envoysim as a %s filter", f.GetName(), tn, where)
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("empty http filter chain: the last filter must be %s", terminal)
	}
	return out, nil
}

func (s *Sim) compileRouter(list []*hcmv3.HttpFilter) (*routerConfig, error) {
	last := list[len(list)-1]
	msg, err := last.GetTypedConfig().UnmarshalNew()
	if err != nil {
		return nil, err
	}
	pb := msg.(*routerv3.Router)
	rc := &routerConfig{suppressEnvoyHeaders: pb.GetSuppressEnvoyHeaders()}
	if len(pb.GetUpstreamHttpFilters()) > 0 {
		fs, err := s.compileHTTPFilters(pb.GetUpstreamHttpFilters(), true)
		if err != nil {
			return nil, fmt.Errorf("router upstream_http_filters: %w", err)
		}
		rc.upstreamFilters = fs
	}
	return rc, nil
}
