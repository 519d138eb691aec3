// Command retrylint reports the mistakes of a Conflict-retry closure
// (retry.RetryOnConflict and the like): retrylint ./... alone, or
// go vet -vettool=$(which retrylint) ./... under go vet. The rules:
// https://github.com/kuberetry/retry/blob/main/docs/retrylint.md.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/kuberetry/retry/retrylint"
)

func main() { singlechecker.Main(retrylint.Analyzer) }
