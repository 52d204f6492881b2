package admin

import (
	"net/http"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

// listModels answers GET /v1/models in OpenAI's format (what SDKs and UIs call), from the
// configuration in force, with the body the route role answers on the data plane.
func (a *api) listModels(w http.ResponseWriter, _ *http.Request) {
	names := a.r.Config().Models()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(dialect.ModelsBody(dialect.OpenAI, names, time.Unix(0, 0)))
}
