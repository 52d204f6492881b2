package sim

import (
	"errors"
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// directResponse is a compiled Route.direct_response (DirectResponseAction).
type directResponse struct {
	status int
	body   string
}

// compileDirectResponse imitates the DirectResponseEntry of config_impl.cc. The body
// comes from body.inline_string / inline_bytes (filename, environment_variable and
// body_format are rejected by the allow-list). 201 and 3xx answers, which take a
// Location from the route's redirect fields, are not modelled.
func compileDirectResponse(pb *routev3.DirectResponseAction) (*directResponse, error) {
	d := &directResponse{status: int(pb.GetStatus())}
	if d.status == 201 || (d.status >= 300 && d.status < 400) {
		return nil, fmt.Errorf("direct_response status %d (a Location answer) is not supported by envoysim", d.status)
	}
	if b := pb.GetBody(); b != nil {
		switch {
		case b.GetInlineString() != "":
			d.body = b.GetInlineString()
		case len(b.GetInlineBytes()) > 0:
			d.body = string(b.GetInlineBytes())
		default:
			return nil, errors.New("direct_response.body: only inline_string and inline_bytes are supported by envoysim")
		}
	}
	return d, nil
}

// directResponse imitates the direct response branch of router.cc Filter::decodeHeaders:
// after the decoder filters ran, a local reply with the configured status and body
// (content-type text/plain for a non-empty body), details "direct_response".
func (r *router) directResponse(d *directResponse) {
	r.localReply(d.status, d.body, "", "direct_response")
}
