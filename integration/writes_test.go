package integration_test

import "testing"

// TestWrites runs the tests of every write a controller makes against one
// apiserver (a start costs seconds; each test works in namespaces of its
// own): what a create from a stored copy must not carry, CreateOrUpdate
// racing, recreating and reconciling, apply conflicts, the unstructured
// no-op check, and the README's "Every write" functions.
func TestWrites(t *testing.T) {
	s := startServer(t)
	t.Run("CreateFromStoredCopy", func(t *testing.T) { testCreateFromStoredCopy(t, s) })
	t.Run("CreateOrUpdateRace", func(t *testing.T) { testCreateOrUpdateRace(t, s) })
	t.Run("CreateOrUpdateFromDeletedCache", func(t *testing.T) { testCreateOrUpdateFromDeletedCache(t, s) })
	t.Run("CreateOrUpdateControllerRuntime", func(t *testing.T) { testCreateOrUpdateControllerRuntime(t, s) })
	t.Run("ApplyConflict", func(t *testing.T) { testApplyConflict(t, s) })
	t.Run("UnstructuredNoop", func(t *testing.T) { testUnstructuredNoop(t, s) })
	t.Run("EveryWrite", func(t *testing.T) { testEveryWrite(t, s) })
}
