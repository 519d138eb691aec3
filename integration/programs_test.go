package integration_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuidePrograms builds every ```go block of the README and the guides
// that is a whole program (package main, imports included), as a reader
// who pastes it would: it writes the block as main.go into a directory of
// its own inside this module, whose go.mod has client-go, and runs go vet
// on it. TestGuideGoBlocks leaves such blocks to this test. The README's
// Quick start must be one such program.
func TestGuidePrograms(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the programs: %v", err)
	}
	for _, doc := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := goBlocks(string(md))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		for _, b := range blocks {
			if isProgram(b.text) {
				vetProgram(t, goCmd, doc, b)
			}
		}
	}

	md, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, quickStart, ok := strings.Cut(string(md), "\n## Quick start\n")
	if !ok {
		t.Fatal("README.md has no section ## Quick start")
	}
	quickStart, _, _ = strings.Cut(quickStart, "\n## ")
	blocks, err := goBlocks(quickStart)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || !isProgram(blocks[0].text) {
		t.Errorf("README.md's Quick start has %d Go blocks; it must be one whole program (package main)", len(blocks))
	}
}

// isProgram reports whether a Go block is a whole program.
func isProgram(block string) bool {
	return strings.HasPrefix(block, "package main\n")
}

// vetProgram runs go vet on block b of doc, written as main.go into a
// directory of its own that go's ./... patterns skip (its name begins with
// an underscore), removed afterwards.
func vetProgram(t *testing.T, goCmd, doc string, b goBlock) {
	t.Helper()
	dir, err := os.MkdirTemp(".", "_program-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goCmd, "vet", "./"+filepath.Base(dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s:%d: the program does not build or vet: %v\n%s", doc, b.line, err, out)
	} else {
		t.Logf("%s:%d: a program, built and vetted", doc, b.line)
	}
}
