package admin

import (
	"fmt"
	"net/http"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// routeChains: CRUD of fallback chains, keyed by (publicModel, reason) (behaviour §7.6, §11.2),
// and their kill switch. A public model with a '/' is sent percent-encoded (%2F) in a path.
func (a *api) routeChains(mux *http.ServeMux) {
	const one = "/admin/fallback-chains/{model}/{reason}"
	mux.HandleFunc("GET /admin/fallback-chains", func(w http.ResponseWriter, req *http.Request) {
		a.read(w, req, func(snap store.ConfigSnapshot) (any, error) {
			items, err := protoList(snap.Config.GetFallbackChains())
			return list(items), err
		})
	})
	mux.HandleFunc("GET "+one, func(w http.ResponseWriter, req *http.Request) {
		model, reason := req.PathValue("model"), req.PathValue("reason")
		a.read(w, req, func(snap store.ConfigSnapshot) (any, error) {
			i := chainIndex(snap.Config, model, reason)
			if i < 0 {
				return nil, chainNotFound(model, reason)
			}
			return protoJSON(snap.Config.FallbackChains[i])
		})
	})
	mux.HandleFunc("POST /admin/fallback-chains", func(w http.ResponseWriter, req *http.Request) {
		a.putChain(w, req, "", "", true)
	})
	mux.HandleFunc("PUT "+one, func(w http.ResponseWriter, req *http.Request) {
		a.putChain(w, req, req.PathValue("model"), req.PathValue("reason"), false)
	})
	mux.HandleFunc("DELETE "+one, func(w http.ResponseWriter, req *http.Request) {
		model, reason := req.PathValue("model"), req.PathValue("reason")
		a.write(w, req, "delete fallback chain", func(cfg *configv1.Config, _ map[string]string) (edit, error) {
			i := chainIndex(cfg, model, reason)
			if i < 0 {
				return edit{}, chainNotFound(model, reason)
			}
			cfg.FallbackChains = append(cfg.FallbackChains[:i], cfg.FallbackChains[i+1:]...)
			return edit{status: http.StatusNoContent}, nil
		})
	})
	for action, enabled := range map[string]bool{"enable": true, "disable": false} {
		mux.HandleFunc("POST "+one+"/"+action, func(w http.ResponseWriter, req *http.Request) {
			model, reason := req.PathValue("model"), req.PathValue("reason")
			a.write(w, req, action+" fallback chain", func(cfg *configv1.Config, _ map[string]string) (edit, error) {
				i := chainIndex(cfg, model, reason)
				if i < 0 {
					return edit{}, chainNotFound(model, reason)
				}
				c := cfg.FallbackChains[i]
				c.Enabled = proto.Bool(enabled)
				body, err := protoJSON(c)
				return edit{status: http.StatusOK, body: body}, err
			})
		})
	}
}

// putChain creates (POST: 409 if the pair exists) or creates-or-replaces (PUT, the pair
// from the path) a chain.
func (a *api) putChain(w http.ResponseWriter, req *http.Request, model, reason string, create bool) {
	c := &configv1.FallbackChain{}
	if err := decode(req, c); err != nil {
		a.answer(w, req, err)
		return
	}
	if !create {
		if err := fromPath("publicModel", &c.PublicModel, model); err != nil {
			a.answer(w, req, err)
			return
		}
		if err := fromPath("reason", &c.Reason, reason); err != nil {
			a.answer(w, req, err)
			return
		}
	}
	if err := a.v.Message("", c); err != nil {
		a.answer(w, req, err)
		return
	}
	a.write(w, req, "put fallback chain", func(cfg *configv1.Config, _ map[string]string) (edit, error) {
		i := chainIndex(cfg, c.GetPublicModel(), c.GetReason())
		status := http.StatusOK
		switch {
		case i >= 0 && create:
			return edit{}, conflict(fmt.Sprintf("The %s chain of %q", c.GetReason(), c.GetPublicModel()))
		case i >= 0:
			cfg.FallbackChains[i] = c
		default:
			status = http.StatusCreated
			i = len(cfg.FallbackChains)
			cfg.FallbackChains = append(cfg.FallbackChains, c)
		}
		body, err := protoJSON(c)
		return edit{status: status, body: body, path: fmt.Sprintf("fallbackChains[%d]", i)}, err
	})
}

// fromPath fills a body field from the path, or refuses a body that names another object.
func fromPath(field string, v *string, path string) error {
	switch *v {
	case "":
		*v = path
	case path:
	default:
		return badField(field, fmt.Sprintf("%q differs from the path's %q", *v, path))
	}
	return nil
}

func chainIndex(cfg *configv1.Config, model, reason string) int {
	for i, c := range cfg.GetFallbackChains() {
		if c.GetPublicModel() == model && c.GetReason() == reason {
			return i
		}
	}
	return -1
}

func chainNotFound(model, reason string) error {
	return notFound(fmt.Sprintf("The %s fallback chain of %q", reason, model))
}
