package integration_test

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The repository's root, seen from this package's directory.
const repoRoot = ".."

// TestGuideGoBlocks fails unless every ```go block of the README and of
// every guide (docs/*.md) is held, as written there, by a _test.go file of
// the repository (any of its modules): as Go code, not inside a string
// or a comment, at the top level or up to three tabs deeper (a block that
// is a function's body). The tests of the file that holds a block compile
// and run it: everywrite_test.go the writes, guides_test.go the other
// snippets that need an apiserver, the root module's docs_test.go those
// that need only the library.
func TestGuideGoBlocks(t *testing.T) {
	sources := testSources(t)
	for _, doc := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := goBlocks(string(md))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		// The parser must find every fence the file opens.
		if fences := len(regexp.MustCompile("(?m)^[ \t]*```go[ \t]*$").FindAllIndex(md, -1)); fences != len(blocks) {
			t.Errorf("%s: %d ```go fences, but %d Go blocks parsed", doc, fences, len(blocks))
		}
		for _, b := range blocks {
			if isProgram(b.text) { // a _test.go file cannot hold one
				t.Logf("%s:%d: a whole program, built by TestGuidePrograms", doc, b.line)
				continue
			}
			if holder := holderOf(sources, b.text); holder == "" {
				first, _, _ := strings.Cut(strings.TrimSpace(b.text), "\n")
				t.Errorf("%s:%d: the Go block %q is in no _test.go file as written", doc, b.line, first)
			} else {
				t.Logf("%s:%d: held by %s", doc, b.line, holder)
			}
		}
	}
}

// TestGuideLinks fails unless every relative link of the README, the
// guides, the integration tests' README and the changelog, and every link
// of a doc comment (root and ctrlretry, tests excluded) into this
// repository's main branch on GitHub, names a file or directory of the
// repository and, with a #fragment into a Markdown file, one of its
// headings.
func TestGuideLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	docs := append(docFiles(t), "integration/README.md", "CHANGELOG.md")
	for _, doc := range docs {
		md, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(md), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checkLink(t, doc, filepath.Dir(doc), target)
		}
	}

	repoLink := regexp.MustCompile(`https://github\.com/kuberetry/retry/blob/main/([^\s)\]"]*[^\s)\]".,;:])`)
	sources, err := filepath.Glob(filepath.Join(repoRoot, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join(repoRoot, "ctrlretry", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, src := range append(sources, more...) {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		text, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(repoRoot, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range repoLink.FindAllStringSubmatch(string(text), -1) {
			checkLink(t, rel, ".", m[1])
			links++
		}
	}
	if links == 0 {
		t.Error("no doc comment links into the repository's guides; the doc comments link their guides")
	}
}

// checkLink fails t unless target, a link of file from, relative to the
// directory dir of the repository, names a file or directory of the
// repository and, with a #fragment into a Markdown file, one of its
// headings. A target that is only a #fragment names from itself.
func checkLink(t *testing.T, from, dir, target string) {
	t.Helper()
	file, fragment, _ := strings.Cut(target, "#")
	path := filepath.Join(dir, file)
	if file == "" {
		path = from
	}
	if _, err := os.Stat(filepath.Join(repoRoot, path)); err != nil {
		t.Errorf("%s: link %q: %v", from, target, err)
		return
	}
	if fragment == "" || !strings.HasSuffix(path, ".md") {
		return
	}
	text, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	if !hasHeading(string(text), fragment) {
		t.Errorf("%s: link %q: %s has no heading #%s", from, target, path, fragment)
	}
}

// TestGuidesReachable fails unless every guide (docs/*.md) can be reached
// from the README by following relative links between Markdown files.
func TestGuidesReachable(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s#]+\.md)(#[^)\s]*)?\)`)
	seen := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		doc := queue[0]
		queue = queue[1:]
		md, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(md), -1) {
			if strings.Contains(m[1], "://") {
				continue
			}
			target := filepath.ToSlash(filepath.Join(filepath.Dir(doc), m[1]))
			if _, err := os.Stat(filepath.Join(repoRoot, target)); err == nil && !seen[target] {
				seen[target] = true
				queue = append(queue, target)
			}
		}
	}
	for _, doc := range docFiles(t) {
		if !seen[doc] {
			t.Errorf("%s is linked from no page that the README leads to", doc)
		}
	}
}

// docFiles returns the README and the guides, relative to the repository
// root.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) == 0 {
		t.Fatal("no guides in docs/")
	}
	docs := []string{"README.md"}
	for _, g := range guides {
		rel, err := filepath.Rel(repoRoot, g)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, filepath.ToSlash(rel))
	}
	return docs
}

// testSources returns every _test.go file of the repository, by path.
func testSources(t *testing.T) map[string]string {
	t.Helper()
	sources := map[string]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		// retrylint's testdata holds its guide's examples, as its tests run them.
		case d.IsDir() && path != repoRoot && (strings.HasPrefix(d.Name(), ".") ||
			d.Name() == "testdata" && path != filepath.Join(repoRoot, "retrylint", "testdata")):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, "_test.go"):
			src, err := os.ReadFile(path)
			sources[path] = string(src)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sources
}

// goBlock is the text of a ```go block, without the indentation of its
// fence (a block in a list item is indented), and the line of its first
// line in the Markdown file.
type goBlock struct {
	text string
	line int
}

// goBlocks returns the ```go blocks of the Markdown text md.
func goBlocks(md string) ([]goBlock, error) {
	var blocks []goBlock
	var block *strings.Builder
	var indent string
	var start int
	for i, l := range strings.SplitAfter(md, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case block == nil && trimmed == "```go":
			block, start = &strings.Builder{}, i+2
			indent = l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		case block != nil && trimmed == "```":
			blocks = append(blocks, goBlock{text: block.String(), line: start})
			block = nil
		case block != nil:
			block.WriteString(strings.TrimPrefix(l, indent))
		}
	}
	if block != nil {
		return nil, fmt.Errorf("the Go block at line %d is not closed", start)
	}
	return blocks, nil
}

// holderOf returns the path of a source that holds block as Go code, at
// the top level or up to three tabs deeper, or "" if none does.
func holderOf(sources map[string]string, block string) string {
	for depth := range 4 {
		want := indent(block, depth)
		for path, src := range sources {
			for at := 0; ; {
				i := strings.Index(src[at:], want)
				if i < 0 {
					break
				}
				if isCode(src, at+i, at+i+len(want)) {
					return path
				}
				at += i + 1
			}
		}
	}
	return ""
}

// indent puts depth tabs before each line of s that is not empty.
func indent(s string, depth int) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = strings.Repeat("\t", depth) + l
		}
	}
	return strings.Join(lines, "")
}

// isCode reports whether src[from:to], without its leading and trailing
// white space, begins where a Go token begins and ends where one ends, and
// holds a token that is not a comment: Go code, not text inside a string
// literal or a comment.
func isCode(src string, from, to int) bool {
	for from < to && unicode.IsSpace(rune(src[from])) {
		from++
	}
	for to > from && unicode.IsSpace(rune(src[to-1])) {
		to--
	}
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, []byte(src), nil, scanner.ScanComments)
	begins, ends, code := false, false, false
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end, not in the text
		}
		off := file.Offset(pos)
		n := len(lit)
		if n == 0 {
			n = len(tok.String()) // an operator or a delimiter
		}
		if off >= to {
			break
		}
		if off >= from {
			begins = begins || off == from
			code = code || tok != token.COMMENT
		}
		ends = ends || off+n == to
	}
	return begins && ends && code
}

// hasHeading reports whether the Markdown text md has a heading whose
// GitHub anchor is fragment.
func hasHeading(md, fragment string) bool {
	for l := range strings.SplitSeq(md, "\n") {
		if title, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && strings.HasPrefix(l, "#") && anchor(title) == fragment {
			return true
		}
	}
	return false
}

// anchor is GitHub's anchor for a heading: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores dropped.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(title)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
