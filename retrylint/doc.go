// Package retrylint is a go/analysis analyzer that finds the known
// mistakes made with a Conflict-retry closure: the function literal given
// to client-go's retry.RetryOnConflict or this module's RetryOnConflict
// and RetryOnConflictWithContext; or, with a predicate that accepts
// Conflicts, to client-go's retry.OnError or this module's OnError,
// OnErrorWithContext, OnErrorValue, OnRetryAfterError and
// OnRetryAfterErrorWithContext.
//
// Each report starts with its category, which is also the Diagnostic's
// Category:
//
//   - stale-object: a write (Update or UpdateStatus) of an object read
//     before the loop and never read again in the closure; every retry
//     sends the same resourceVersion and meets the same Conflict. It
//     carries a suggested fix when the read is a Get in the same function.
//   - cached-read: a read from a lister or a cache.Store in the closure,
//     which after a Conflict may still be behind the server; only with the
//     flag -cached-read.
//   - lost-conflict: the closure returns a write's error formatted with a
//     verb other than %w (or through its text), so the loop sees no
//     Conflict and does not retry.
//   - dropped-error: a write's error discarded.
//   - nested-retry: a retry loop, or a write loop of this module or of its
//     ctrlretry module, called inside the closure: the attempts multiply.
//
// Functions are identified by their package path and name, never by how a
// file spells its imports. What each rule reports and leaves alone, with a
// wrong and a right example of each and the one-call form of this module
// that cannot make the mistake:
// https://github.com/kuberetry/retry/blob/main/docs/retrylint.md.
//
// The command github.com/kuberetry/retry/retrylint/cmd/retrylint runs the
// Analyzer alone (retrylint ./...) or under go vet
// (go vet -vettool=$(which retrylint) ./...).
package retrylint
