package admin

import (
	"net/http"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// routeSettings: GET /admin/router-settings returns the effective settings (defaults where
// never set); PUT merges a partial body into the stored ones (omitted fields keep their
// value, the executionPolicies matrix is replaced whole) and answers the new effective
// settings (behaviour §11.1).
func (a *api) routeSettings(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/router-settings", func(w http.ResponseWriter, req *http.Request) {
		a.read(w, req, func(snap store.ConfigSnapshot) (any, error) {
			return protoJSON(config.EffectiveSettings(snap.Config.GetRouterSettings()))
		})
	})
	mux.HandleFunc("PUT /admin/router-settings", func(w http.ResponseWriter, req *http.Request) {
		patch := &configv1.RouterSettings{}
		if err := decode(req, patch); err != nil {
			a.answer(w, req, err)
			return
		}
		a.write(w, req, "put router settings", func(cfg *configv1.Config, _ map[string]string) (edit, error) {
			merged, err := a.v.PatchSettings(cfg.GetRouterSettings(), patch)
			if err != nil {
				return edit{}, err
			}
			cfg.RouterSettings = merged
			body, err := protoJSON(config.EffectiveSettings(merged))
			return edit{status: http.StatusOK, body: body, path: "routerSettings"}, err
		})
	})
}
