package admin

import (
	"encoding/json"
	"fmt"
	"net/http"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// routeDeployments: CRUD of deployments (behaviour §1.3, §11.2) and their kill switch (behaviour §1.2).
// A PUT replaces the whole deployment except its key: apiKey is write-only (behaviour §11.3), so
// a body without one keeps the stored key and every answer shows apiKeySet instead.
func (a *api) routeDeployments(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/deployments", func(w http.ResponseWriter, req *http.Request) {
		a.read(w, req, func(snap store.ConfigSnapshot) (any, error) {
			items := make([]json.RawMessage, 0, len(snap.Config.GetDeployments()))
			for _, d := range snap.Config.GetDeployments() {
				v, err := deploymentView(d, snap.Secrets[d.GetId()] != "")
				if err != nil {
					return nil, err
				}
				items = append(items, v)
			}
			return list(items), nil
		})
	})
	mux.HandleFunc("GET /admin/deployments/{id}", func(w http.ResponseWriter, req *http.Request) {
		id := req.PathValue("id")
		a.read(w, req, func(snap store.ConfigSnapshot) (any, error) {
			i := deploymentIndex(snap.Config, id)
			if i < 0 {
				return nil, notFound(fmt.Sprintf("Deployment %q", id))
			}
			return deploymentView(snap.Config.Deployments[i], snap.Secrets[id] != "")
		})
	})
	mux.HandleFunc("POST /admin/deployments", func(w http.ResponseWriter, req *http.Request) {
		a.putDeployment(w, req, "", true)
	})
	mux.HandleFunc("PUT /admin/deployments/{id}", func(w http.ResponseWriter, req *http.Request) {
		a.putDeployment(w, req, req.PathValue("id"), false)
	})
	mux.HandleFunc("DELETE /admin/deployments/{id}", func(w http.ResponseWriter, req *http.Request) {
		id := req.PathValue("id")
		a.write(w, req, "delete deployment", func(cfg *configv1.Config, _ map[string]string) (edit, error) {
			i := deploymentIndex(cfg, id)
			if i < 0 {
				return edit{}, notFound(fmt.Sprintf("Deployment %q", id))
			}
			cfg.Deployments = append(cfg.Deployments[:i], cfg.Deployments[i+1:]...)
			return edit{status: http.StatusNoContent}, nil
		})
	})
	for action, enabled := range map[string]bool{"enable": true, "disable": false} {
		mux.HandleFunc("POST /admin/deployments/{id}/"+action, func(w http.ResponseWriter, req *http.Request) {
			id := req.PathValue("id")
			a.write(w, req, action+" deployment", func(cfg *configv1.Config, secrets map[string]string) (edit, error) {
				i := deploymentIndex(cfg, id)
				if i < 0 {
					return edit{}, notFound(fmt.Sprintf("Deployment %q", id))
				}
				d := cfg.Deployments[i]
				d.Enabled = proto.Bool(enabled)
				body, err := deploymentView(d, secrets[id] != "")
				return edit{status: http.StatusOK, body: body}, err
			})
		})
	}
}

// putDeployment creates (POST: 409 if the id exists) or creates-or-replaces (PUT, id from
// the path) a deployment.
func (a *api) putDeployment(w http.ResponseWriter, req *http.Request, pathID string, create bool) {
	d := &configv1.Deployment{}
	if err := decode(req, d); err != nil {
		a.answer(w, req, err)
		return
	}
	if pathID != "" {
		switch d.GetId() {
		case "":
			d.Id = pathID
		case pathID:
		default:
			a.answer(w, req, badField("id", fmt.Sprintf("%q differs from the path's %q", d.GetId(), pathID)))
			return
		}
	}
	// The deployment alone first, so its errors name the body's fields (`weight`).
	if err := a.v.Message("", d); err != nil {
		a.answer(w, req, err)
		return
	}
	op := "put deployment"
	if create {
		op = "create deployment"
	}
	a.write(w, req, op, func(cfg *configv1.Config, secrets map[string]string) (edit, error) {
		i := deploymentIndex(cfg, d.GetId())
		status := http.StatusOK
		switch {
		case i >= 0 && create:
			return edit{}, conflict(fmt.Sprintf("Deployment %q", d.GetId()))
		case i >= 0:
			cfg.Deployments[i] = d
		default:
			status = http.StatusCreated
			i = len(cfg.Deployments)
			cfg.Deployments = append(cfg.Deployments, d)
		}
		body, err := deploymentView(d, d.GetApiKey() != "" || secrets[d.GetId()] != "")
		return edit{status: status, body: body, path: fmt.Sprintf("deployments[%d]", i)}, err
	})
}

func deploymentIndex(cfg *configv1.Config, id string) int {
	for i, d := range cfg.GetDeployments() {
		if d.GetId() == id {
			return i
		}
	}
	return -1
}
