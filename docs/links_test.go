package docs_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The repository must stand alone for whoever clones it: nothing may point outside it, every
// relative markdown link must reach a file in it, and citations name its own docs
// (behaviour §N.M → docs/behaviour.md, docs/design.md, docs/wire-formats.md), never notes
// kept beside the repository.

// selfName is this file, which spells what it forbids.
const selfName = "docs/links_test.go"

var (
	// mdLink is an inline markdown link or image target: [text](target "title").
	mdLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// mdRef is a reference-style link definition: [label]: target.
	mdRef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// upPath is a relative path climbing out of its directory, e.g. ../envoy/envoy.yaml;
	// the group before it keeps "…/x" and "a../b" out.
	upPath = regexp.MustCompile(`(?:^|[^\w./-])((?:\.\./)+[-\w./]*)`)
	// scheme marks a URL (https:, mailto:, …), which is not a repository path.
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// outsideCitations are citations of documents a clone does not have.
var outsideCitations = []struct {
	re   *regexp.Regexp
	want string
}{
	{regexp.MustCompile(`\bSPEC\b`), "behaviour §N.M / docs/behaviour.md"},
	{regexp.MustCompile(`DESIGN\.md`), "docs/design.md"},
	// The workspace beside a checkout (its shared folder, its absolute root), spelt in two
	// pieces so this file does not name them itself.
	{regexp.MustCompile(`\.\./` + `shared\b|/wo` + `rk/`), "a path in the repository"},
	{regexp.MustCompile(`\bresearch(/| §| ` + "`" + `)`), "docs/wire-formats.md or docs/design.md"},
	{regexp.MustCompile(`envoy-mechanics|peers\.md`), "docs/design.md §N"},
}

// TestRepositoryStandsAlone walks every tracked text file.
func TestRepositoryStandsAlone(t *testing.T) {
	root, files := repoFiles(t)
	known := map[string]bool{} // tracked files and the directories holding them
	for _, f := range files {
		for p := f; p != "."; p = path.Dir(p) {
			known[p] = true
		}
	}
	var problems []string
	seen := map[string]bool{}
	report := func(file string, line int, format string, args ...any) {
		p := fmt.Sprintf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))
		if !seen[p] {
			seen[p] = true
			problems = append(problems, p)
		}
	}
	for _, f := range files {
		if strings.Contains(f, "/testdata/fuzz/") {
			continue // generated fuzz inputs: arbitrary bytes, not prose
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet in the index
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) || f == selfName {
			continue // binary, or this file
		}
		checkFile(f, string(data), known, report)
	}
	for i, p := range problems {
		if i == 100 {
			t.Errorf("… and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
}

// checkFile reports the problems of the repository file name (slash-separated, relative
// to the root) whose content is text.
func checkFile(name, text string, known map[string]bool, report func(string, int, string, ...any)) {
	dir := path.Dir(name)
	isMD := strings.HasSuffix(name, ".md")
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		for _, c := range outsideCitations {
			if m := c.re.FindString(line); m != "" {
				report(name, n, "%q cites a document outside the repository; cite %s", m, c.want)
			}
		}
		for _, m := range upPath.FindAllStringSubmatch(line, -1) {
			if _, ok := resolve(dir, m[1]); !ok {
				report(name, n, "%q leaves the repository", m[1])
			}
		}
		if !isMD {
			continue
		}
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue // code, not links
		}
		var targets []string
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := mdRef.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if msg := checkLink(dir, target, known); msg != "" {
				report(name, n, "link %q %s", target, msg)
			}
		}
	}
}

// checkLink says what is wrong with a markdown link target in directory dir, or "".
func checkLink(dir, target string, known map[string]bool) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "#") {
		return "" // a URL or an anchor in the same file
	}
	target, _, _ = strings.Cut(target, "#")
	target, _, _ = strings.Cut(target, "?")
	if target == "" {
		return ""
	}
	if strings.HasPrefix(target, "/") {
		return "is an absolute path; link relative to the file"
	}
	p, ok := resolve(dir, target)
	if !ok {
		return "leaves the repository"
	}
	if !known[p] {
		return "names no tracked file or directory of the repository"
	}
	return ""
}

// resolve joins a relative path to dir (both relative to the root) and says whether the
// result is still inside the root.
func resolve(dir, rel string) (string, bool) {
	p := path.Join(dir, rel)
	return p, p != ".." && !strings.HasPrefix(p, "../")
}

// repoFiles returns the repository root and its tracked files (slash-separated, relative
// to the root): git's index when git is there, else every file under the root but .git
// and .cache.
func repoFiles(t *testing.T) (string, []string) {
	t.Helper()
	if out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err == nil {
		root := strings.TrimSpace(string(out))
		ls := exec.Command("git", "ls-files", "-z")
		ls.Dir = root
		out, err := ls.Output()
		if err != nil {
			t.Fatalf("git ls-files: %v", err)
		}
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
		return root, files
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" || d.Name() == ".cache" { // not the repository's (.gitignore)
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return root, files
}

// TestStandsAloneCatches feeds the checker one line of each kind it must refuse, and lines
// it must accept.
func TestStandsAloneCatches(t *testing.T) {
	known := map[string]bool{"README.md": true, "docs": true, "docs/design.md": true, "envoy": true, "envoy/envoy.yaml": true}
	for _, c := range []struct {
		name, file, line string
		bad              bool
	}{
		{"link outside the root", "README.md", "[spec](../outside/notes.md)", true},
		{"path outside the root", "docs/x.go", `os.ReadFile("../../../elsewhere/x")`, true},
		{"link to a missing file", "docs/x.md", "[gone](missing.md)", true},
		{"reference link to a missing file", "README.md", "[gone]: docs/missing.md", true},
		{"absolute link", "README.md", "[abs](/srv/x.md)", true},
		{"workspace mention", "docs/x.go", "// see .." + "/shared/notes", true},
		{"spec citation", "routing/x.go", "// weight 0 (SPEC §2)", true},
		{"design citation", "xds/x.go", "// DESIGN.md item 3", true},
		{"research citation", "routing/x.go", "// research/wire-formats.md §1.4", true},
		{"envoy research citation", "e2e/x.md", "research `envoy-mechanics.md` §1", true},
		{"behaviour citation", "routing/x.go", "// weight 0 (behaviour §2)", false},
		{"link inside the root", "docs/x.md", "[design](design.md#testing) and [up](../envoy/envoy.yaml)", false},
		{"path inside the root", "e2e/gateway/x.go", `sim.LoadFile("../../envoy/envoy.yaml")`, false},
		{"URL", "README.md", "[envoy](https://www.envoyproxy.io/docs/)", false},
		{"ellipsis is no path", "x.go", "// and .../tls/v3/common.proto", false},
		{"code fence", "docs/x.md", "```\n[x](nowhere.md)\n```", false},
	} {
		var got []string
		checkFile(c.file, c.line, known, func(file string, line int, format string, args ...any) {
			got = append(got, fmt.Sprintf(format, args...))
		})
		if bad := len(got) > 0; bad != c.bad {
			t.Errorf("%s: %q in %s: problems %q, want bad=%v", c.name, c.line, c.file, got, c.bad)
		}
	}
}

var (
	behaviourCite = regexp.MustCompile(`behaviour §(\d+(?:\.\d+)?)`)
	wireCite      = regexp.MustCompile(`wire-formats(?:\.md)? §(\d+(?:\.\d+)?)`)
	designItem    = regexp.MustCompile("docs/design\\.md`?,? items? (\\d+)")
	designSection = regexp.MustCompile("docs/design\\.md`?,? §(\\d+(?:\\.\\d+)?)(?: items? (\\d+))?")
	designName    = regexp.MustCompile("docs/design\\.md`?,? \"([^\"]+)\"")
)

// TestCitationsResolve holds every citation of the repository's own docs to a section that
// exists: behaviour §N.M, wire-formats §N.M, docs/design.md item N, §N (and §6 item N) and
// "Section name".
func TestCitationsResolve(t *testing.T) {
	root, files := repoFiles(t)
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(root, "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	behaviour := numbered(read("behaviour.md"), `^## (\d+)\.`, `^(\d+\.\d+) `)
	wire := numbered(read("wire-formats.md"), `^## (\d+)\.`, `^### (\d+\.\d+) `)
	design := read("design.md")
	items := numbered(design, `^### (\d+)\. `)
	envoy := numbered(design, `^### §(\d+) `, `^\*\*§?(\d+\.\d+) `)
	_, checklist, _ := strings.Cut(design, "\n### §6 ")
	envoyItems := numbered(checklist, `^(\d+)\. `)
	headings := regexp.MustCompile(`(?m)^#+ .*$`).FindAllString(design, -1)

	for _, f := range files {
		if strings.Contains(f, "/testdata/fuzz/") || f == selfName {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			continue // deleted in the work tree, or binary
		}
		for i, line := range strings.Split(string(data), "\n") {
			bad := func(what string) { t.Errorf("%s:%d: %s names no section of its doc", f, i+1, what) }
			for _, m := range behaviourCite.FindAllStringSubmatch(line, -1) {
				if !behaviour[m[1]] {
					bad(m[0])
				}
			}
			for _, m := range wireCite.FindAllStringSubmatch(line, -1) {
				if !wire[m[1]] {
					bad(m[0])
				}
			}
			for _, m := range designItem.FindAllStringSubmatch(line, -1) {
				if !items[m[1]] {
					bad(m[0])
				}
			}
			for _, m := range designSection.FindAllStringSubmatch(line, -1) {
				if !envoy[m[1]] || (m[2] != "" && (m[1] != "6" || !envoyItems[m[2]])) {
					bad(m[0])
				}
			}
			for _, m := range designName.FindAllStringSubmatch(line, -1) {
				if !slices.ContainsFunc(headings, func(h string) bool { return strings.Contains(h, m[1]) }) {
					bad(m[0])
				}
			}
		}
	}
}

// numbered returns the numbers the patterns (one group each, matched per line) find in text.
func numbered(text string, patterns ...string) map[string]bool {
	out := map[string]bool{}
	for _, p := range patterns {
		for _, m := range regexp.MustCompile("(?m)"+p).FindAllStringSubmatch(text, -1) {
			out[m[1]] = true
		}
	}
	return out
}
