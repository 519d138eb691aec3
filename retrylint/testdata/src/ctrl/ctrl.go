// Package ctrl exercises the rules over controller-runtime's client and
// its status writer.
package ctrl

import (
	"context"
	"fmt"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	widgetsv1 "example.com/widgets/apis/v1"

	kretry "github.com/kuberetry/retry"
)

func stale(ctx context.Context, c client.Client, w *widgetsv1.Widget) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w.Spec.Size = 2
		return c.Update(ctx, w) // want `^stale-object: Writer.Update writes w, .*ctrlretry.CreateOrUpdate`
	})
}

func staleStatus(ctx context.Context, c client.Client, w *widgetsv1.Widget) error {
	return kretry.RetryOnConflictWithContext(ctx, kretry.DefaultRetry, func(ctx context.Context) error {
		w.Status.Ready = true
		return c.Status().Update(ctx, w) // want `^stale-object: SubResourceWriter.Update writes w`
	})
}

func droppedStatus(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var w widgetsv1.Widget
		if err := c.Get(ctx, key, &w); err != nil {
			return err
		}
		_ = c.Status().Update(ctx, &w) // want `^dropped-error: the error of SubResourceWriter.Update is discarded`
		return nil
	})
}

func lost(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w := &widgetsv1.Widget{}
		if err := c.Get(ctx, key, w); err != nil {
			return err
		}
		if err := c.Update(ctx, w); err != nil {
			return fmt.Errorf("update widget: %v", err) // want `^lost-conflict: `
		}
		return nil
	})
}

// Nothing is reported below.

// getInto reads into the object declared before the loop.
func getInto(ctx context.Context, c client.Client, w *widgetsv1.Widget) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		w.Spec.Size = 2
		return c.Update(ctx, w)
	})
}

// patch is not a write of the rules.
func patch(ctx context.Context, c client.Client, w *widgetsv1.Widget, p client.Patch) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return c.Patch(ctx, w, p)
	})
}

// helperRead reads into the object through a helper of this package, as
// kuberay's tests do with getResourceFunc(ctx, key, obj) in Eventually.
func helperRead(ctx context.Context, c client.Client, w *widgetsv1.Widget) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := getResourceFunc(ctx, c, client.ObjectKeyFromObject(w), w)(); err != nil {
			return err
		}
		w.Spec.Size = 4
		return c.Update(ctx, w)
	})
}

func getResourceFunc(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object) func() error {
	return func() error {
		return c.Get(ctx, key, obj)
	}
}

// helperMutates changes the object through a helper that does not read:
// still stale.
func helperMutates(ctx context.Context, c client.Client, w *widgetsv1.Widget) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		grow(w)
		return c.Update(ctx, w) // want `^stale-object: `
	})
}

func grow(w *widgetsv1.Widget) { w.Spec.Size++ }
