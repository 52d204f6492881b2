package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Issue 16 item 2: a base URL xds cannot turn into a cluster is refused at the write, a 400
// naming baseUrl, and nothing is stored.
func TestDeploymentBadBaseURLRefused(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		for _, bad := range []string{
			"ftp://x", "file:///etc/passwd", "http://", "https://:443", "http://h:0", "http://h:99999",
			"http://h:", "https://user:pw@api.openai.com", "https://api.openai.com/#frag", "api.openai.com",
		} {
			body := strings.Replace(deploymentBody, `"https://api.openai.com"`, `"`+bad+`"`, 1)
			e.wantField("baseUrl", "POST", "/admin/deployments", body)
			e.wantField("baseUrl", "PUT", "/admin/deployments/seed", strings.Replace(body, `"d2"`, `"seed"`, 1))
		}
		list, _ := e.want(http.StatusOK, "GET", "/admin/deployments", "")
		if data := list["data"].([]any); len(data) != 1 || data[0].(map[string]any)["baseUrl"] != "https://api.openai.com" {
			t.Fatalf("a refused write changed the deployments: %v", list)
		}
		e.want(http.StatusCreated, "POST", "/admin/deployments", deploymentBody)
		for _, good := range []string{"http://localhost:8080", "https://myres.openai.azure.com/openai", "http://[::1]:9000"} {
			body := strings.Replace(deploymentBody, `"https://api.openai.com"`, `"`+good+`"`, 1)
			e.want(http.StatusOK, "PUT", "/admin/deployments/d2", body)
		}
	})
}

// Issue 16 item 8: a key with a CR, LF or other control character cannot be sent as a
// header; it is refused naming apiKey, and the answer does not repeat it.
func TestDeploymentKeyWithControlCharacterRefused(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		for _, bad := range []string{`sk-live-SECRET-0002\r\nX-Evil: 1`, `sk-live-SECRET-0002\n`, `sk-live-SECRET-0002\u0000`, `sk-live-SECRET-0002\t`, `sk-live-SECRET-0002\u007f`} {
			body := strings.Replace(deploymentBody, `"sk-live-SECRET-0002"`, `"`+bad+`"`, 1)
			e.wantField("apiKey", "POST", "/admin/deployments", body)
		}
		e.want(http.StatusNotFound, "GET", "/admin/deployments/d2", "")
	})
}

// Issue 16 item 13: a body over the limit is a 413; a wrong type or a negative number names
// its field in param.
func TestAdminBodyErrors(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		huge := `{"id":"d2","name":"` + strings.Repeat("x", 2<<20) + `"}`
		for _, path := range []string{"/admin/deployments", "/admin/client-keys"} {
			out, _ := e.want(http.StatusRequestEntityTooLarge, "POST", path, huge)
			if er, _ := out["error"].(map[string]any); er["code"] != "body_too_large" {
				t.Fatalf("POST %s over the limit: %v, want code body_too_large", path, out)
			}
		}
		for field, repl := range map[string]string{
			"weight":   `"weight":-1`,
			"rpmLimit": `"weight":2,"rpmLimit":-5`,
			"tpmLimit": `"weight":2,"tpmLimit":"many"`,
		} {
			e.wantField(field, "POST", "/admin/deployments", strings.Replace(deploymentBody, `"weight":2`, repl, 1))
		}
		e.wantField("weight", "POST", "/admin/deployments", strings.Replace(deploymentBody, `"weight":2`, `"weight":"2x"`, 1))
		e.wantField("allowedFails", "PUT", "/admin/router-settings", `{"allowedFails":-3}`)
	})
}

// Issue 16 item 13: every listed deployment shows enabled, true when never set.
func TestDeploymentsShowEnabled(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		e.want(http.StatusCreated, "POST", "/admin/deployments", deploymentBody)
		e.want(http.StatusOK, "POST", "/admin/deployments/d2/disable", "")
		list, _ := e.want(http.StatusOK, "GET", "/admin/deployments", "")
		want := map[string]any{"seed": true, "d2": false}
		for _, d := range list["data"].([]any) {
			m := d.(map[string]any)
			if got, ok := m["enabled"]; !ok || got != want[m["id"].(string)] {
				t.Fatalf("deployment %v: enabled %v (present %v), want %v", m["id"], got, ok, want[m["id"].(string)])
			}
		}
		one, _ := e.want(http.StatusOK, "GET", "/admin/deployments/seed", "")
		if one["enabled"] != true {
			t.Fatalf("GET seed = %v, want enabled true", one)
		}
	})
}
