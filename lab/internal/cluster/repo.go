package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// RepoRoot returns the directory of the retry module's go.mod (the
// repository's root, where docs/ is), searched for from the working
// directory upwards.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/kuberetry/retry\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/kuberetry/retry here or above: use --out")
		}
		dir = parent
	}
}
