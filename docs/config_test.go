// Package docs_test keeps docs/configuration.md true to the configuration schema.
package docs_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// docRow is one field row of a message's table: | `jsonName` | type | meaning |.
var docRow = regexp.MustCompile("^\\| `([A-Za-z0-9]+)` \\|")

// sections maps each "## Message" heading of the doc to its field rows (JSON name → row).
func sections(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]string{}
	var cur map[string]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "## "); ok {
			cur = map[string]string{}
			out[strings.TrimSpace(name)] = cur
			continue
		}
		if m := docRow.FindStringSubmatch(line); m != nil && cur != nil {
			cur[m[1]] = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// allowedValues returns the buf.validate `in` list of a string field or of a map's keys.
func allowedValues(fd protoreflect.FieldDescriptor) []string {
	rules, ok := proto.GetExtension(fd.Options(), validate.E_Field).(*validate.FieldRules)
	if !ok || rules == nil {
		return nil
	}
	if in := rules.GetString().GetIn(); len(in) > 0 {
		return in
	}
	return rules.GetMap().GetKeys().GetString().GetIn()
}

// Every message of switchyard.config.v1 has a section in docs/configuration.md listing
// exactly its fields by JSON name (the names a configuration file uses), and every value a
// string field (or map key) accepts is named in the doc (in its row, or in a list above).
func TestConfigurationReferenceMatchesSchema(t *testing.T) {
	doc := sections(t, "configuration.md")
	text, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var walk func(protoreflect.MessageDescriptors)
	seen := map[string]bool{}
	walk = func(msgs protoreflect.MessageDescriptors) {
		for i := range msgs.Len() {
			md := msgs.Get(i)
			if md.IsMapEntry() {
				continue
			}
			name := string(md.Name())
			seen[name] = true
			rows, ok := doc[name]
			if !ok {
				t.Errorf("configuration.md: no section \"## %s\"", name)
				walk(md.Messages())
				continue
			}
			var want []string
			for j := range md.Fields().Len() {
				fd := md.Fields().Get(j)
				want = append(want, fd.JSONName())
				row, ok := rows[fd.JSONName()]
				if !ok {
					t.Errorf("configuration.md: %s.%s is not documented", name, fd.JSONName())
					continue
				}
				for _, v := range allowedValues(fd) {
					if !strings.Contains(row, "`"+v+"`") && !strings.Contains(string(text), "`"+v+"`") {
						t.Errorf("configuration.md: %s.%s accepts %q, which the doc never names", name, fd.JSONName(), v)
					}
				}
			}
			for jn := range rows {
				if !slices.Contains(want, jn) {
					t.Errorf("configuration.md: %s.%s is not a field of the schema", name, jn)
				}
			}
			walk(md.Messages())
		}
	}
	walk(configv1.File_switchyard_config_v1_config_proto.Messages())
	for name := range doc {
		if !seen[name] && name != "" {
			t.Errorf("configuration.md: section %q is not a message of switchyard.config.v1", name)
		}
	}
}
