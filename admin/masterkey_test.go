package admin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/switchyard-gw/switchyard/admin"
)

func TestLoadMasterKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mk")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == admin.MasterKeyEnv {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		name, env, path, want string
		err                   bool
	}{
		{name: "env", env: "from-env", want: "from-env"},
		{name: "file, newline dropped", path: file, want: "from-file"},
		{name: "neither", want: ""},
		{name: "both", env: "from-env", path: file, err: true},
		{name: "empty file", path: empty, err: true},
		{name: "missing file", path: filepath.Join(dir, "nope"), err: true},
	} {
		got, err := admin.LoadMasterKey(env(c.env), c.path)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: LoadMasterKey = %q, %v; want %q, error %v", c.name, got, err, c.want, c.err)
		}
	}
}
