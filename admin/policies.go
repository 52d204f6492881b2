package admin

import (
	"fmt"
	"net/http"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// routePolicies: the per-model policy (behaviour §7, §9.3), one per public model; a model
// without one has the defaults.
func (a *api) routePolicies(mux *http.ServeMux) {
	const one = "/admin/model-policies/{model}"
	mux.HandleFunc("GET /admin/model-policies", func(w http.ResponseWriter, req *http.Request) {
		a.read(w, req, func(snap store.ConfigSnapshot) (any, error) {
			items, err := protoList(snap.Config.GetModelPolicies())
			return list(items), err
		})
	})
	mux.HandleFunc("GET "+one, func(w http.ResponseWriter, req *http.Request) {
		model := req.PathValue("model")
		a.read(w, req, func(snap store.ConfigSnapshot) (any, error) {
			i := policyIndex(snap.Config, model)
			if i < 0 {
				return nil, policyNotFound(model)
			}
			return protoJSON(snap.Config.ModelPolicies[i])
		})
	})
	mux.HandleFunc("PUT "+one, func(w http.ResponseWriter, req *http.Request) {
		p := &configv1.ModelPolicy{}
		if err := decode(req, p); err != nil {
			a.answer(w, req, err)
			return
		}
		if err := fromPath("publicModel", &p.PublicModel, req.PathValue("model")); err != nil {
			a.answer(w, req, err)
			return
		}
		if err := a.v.Message("", p); err != nil {
			a.answer(w, req, err)
			return
		}
		a.write(w, req, "put model policy", func(cfg *configv1.Config, _ map[string]string) (edit, error) {
			i := policyIndex(cfg, p.GetPublicModel())
			status := http.StatusOK
			if i >= 0 {
				cfg.ModelPolicies[i] = p
			} else {
				status = http.StatusCreated
				i = len(cfg.ModelPolicies)
				cfg.ModelPolicies = append(cfg.ModelPolicies, p)
			}
			body, err := protoJSON(p)
			return edit{status: status, body: body, path: fmt.Sprintf("modelPolicies[%d]", i)}, err
		})
	})
	mux.HandleFunc("DELETE "+one, func(w http.ResponseWriter, req *http.Request) {
		model := req.PathValue("model")
		a.write(w, req, "delete model policy", func(cfg *configv1.Config, _ map[string]string) (edit, error) {
			i := policyIndex(cfg, model)
			if i < 0 {
				return edit{}, policyNotFound(model)
			}
			cfg.ModelPolicies = append(cfg.ModelPolicies[:i], cfg.ModelPolicies[i+1:]...)
			return edit{status: http.StatusNoContent}, nil
		})
	})
}

func policyIndex(cfg *configv1.Config, model string) int {
	for i, p := range cfg.GetModelPolicies() {
		if p.GetPublicModel() == model {
			return i
		}
	}
	return -1
}

func policyNotFound(model string) error {
	return notFound(fmt.Sprintf("The policy of %q", model))
}
