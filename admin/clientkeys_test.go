package admin_test

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Client keys: created through the API (shown once), stored only as a hash, listed without
// secrets, verified on another replica (allow-list included), revoked for every replica.
func TestClientKeys(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		created, resp := e.want(http.StatusCreated, "POST", "/admin/client-keys", `{"name":"team-a","models":["gpt-4o"]}`)
		key, _ := created["key"].(string)
		id, _ := created["id"].(string)
		if !strings.HasPrefix(key, admin.ClientKeyPrefix+id+"_") || len(key) < 60 || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("created %v (Cache-Control %q), want an sy- key naming its id, not cached", created, resp.Header.Get("Cache-Control"))
		}
		open, _ := e.want(http.StatusCreated, "POST", "/admin/client-keys", `{"name":"all-models"}`)
		openKey := open["key"].(string)
		e.wantField("models[1]", "POST", "/admin/client-keys", `{"models":["a","a"]}`)
		e.want(http.StatusBadRequest, "POST", "/admin/client-keys", `{"modles":["a"]}`)

		// Never shown again, by any read.
		_, listBody := e.do("GET", "/admin/client-keys", "")
		_, oneBody := e.do("GET", "/admin/client-keys/"+id, "")
		for _, b := range [][]byte{listBody, oneBody} {
			if bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte(openKey)) || bytes.Contains(b, []byte("hash")) {
				t.Fatalf("a read returned a key or its hash: %s", b)
			}
		}
		if !bytes.Contains(listBody, []byte(`"team-a"`)) || !bytes.Contains(oneBody, []byte(`"gpt-4o"`)) {
			t.Fatalf("reads lack the key's name or allow-list: %s / %s", listBody, oneBody)
		}
		for _, s := range []string{key, openKey} {
			if strings.Contains(e.logs.String(), s) {
				t.Fatal("a client key was logged")
			}
		}
		// The store holds a hash, not the key.
		stored, err := e.st.ClientKey(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored.Hash) != 32 || bytes.Contains(stored.Hash, []byte(key)) {
			t.Fatalf("stored record %+v is not a SHA-256", stored)
		}

		// Verified on another replica.
		v := admin.NewVerifier(replica(), admin.VerifierOptions{})
		check := func(presented, model string, wantOK, wantAllowed bool) {
			t.Helper()
			ok, models, err := v.Verify(t.Context(), presented)
			allowed := ok && (len(models) == 0 || slices.Contains(models, model))
			if err != nil || ok != wantOK || allowed != wantAllowed {
				t.Fatalf("Verify(%.12s…, %s) = %v, %v, %v; want %v, %v", presented, model, ok, allowed, err, wantOK, wantAllowed)
			}
		}
		check(key, "gpt-4o", true, true)
		check(key, "gpt-4o-mini", true, false) // not on the allow-list: 403
		check(openKey, "anything", true, true)
		check(key[:len(key)-1]+flip(key[len(key)-1]), "gpt-4o", false, false) // one character off
		check(admin.ClientKeyPrefix+"0000000000000000_"+strings.Repeat("A", 43), "gpt-4o", false, false)
		check("sk-not-ours", "gpt-4o", false, false)
		check("", "gpt-4o", false, false)

		e.want(http.StatusNoContent, "DELETE", "/admin/client-keys/"+id, "")
		e.want(http.StatusNotFound, "DELETE", "/admin/client-keys/"+id, "")
		e.want(http.StatusNotFound, "GET", "/admin/client-keys/"+id, "")
		// Revoked on every replica: the other replica's verifier had the key cached and drops
		// it on the store's announcement (on Redis a pub/sub message, so not in this instant).
		for deadline := time.Now().Add(5 * time.Second); ; {
			if ok, _, _ := v.Verify(t.Context(), key); !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("revoked key still accepted by the other replica after 5s")
			}
			time.Sleep(5 * time.Millisecond) // waiting for a pub/sub message to cross Redis
		}
		check(key, "gpt-4o", false, false)
		check(openKey, "gpt-4o", true, true)
		list, _ := e.want(http.StatusOK, "GET", "/admin/client-keys", "")
		if len(list["data"].([]any)) != 1 {
			t.Fatalf("after revocation: %v", list)
		}
	})
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}
