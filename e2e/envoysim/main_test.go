package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunRejectsBadInvocations(t *testing.T) {
	if err := run(nil); err == nil || !strings.Contains(err.Error(), "missing -c") {
		t.Fatalf("err %v", err)
	}
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("static_resources: {listeners: [{name: l, bogus: 1}]}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-c", p}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("err %v", err)
	}
}
