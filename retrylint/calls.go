package retrylint

import (
	"go/ast"
	"go/types"
	"strings"
)

// writeObject returns the index of a write's object argument: the call is
// a method named Update or UpdateStatus with a parameter of a Kubernetes
// object (a pointer, or an interface, with metav1.Object's accessors;
// *unstructured.Unstructured has them), or controller-runtime's
// client.Writer.Update and client.SubResourceWriter.Update. It returns -1
// for every other call, a cache.Store's Update(obj interface{}) among them.
func writeObject(info *types.Info, call *ast.CallExpr) int {
	fn := callee(info, call)
	if fn == nil || fn.Signature().Recv() == nil {
		return -1
	}
	if fn.Name() != "Update" && fn.Name() != "UpdateStatus" {
		return -1
	}
	params := fn.Signature().Params()
	for i := range params.Len() {
		if fn.Signature().Variadic() && i == params.Len()-1 {
			break
		}
		if isObjectType(params.At(i).Type()) && i < len(call.Args) {
			return i
		}
	}
	return -1
}

// isObjectType reports whether values of t are Kubernetes objects: a
// pointer or an interface whose method set has metav1.Object's accessors
// of the name, the namespace and the resourceVersion.
func isObjectType(t types.Type) bool {
	switch t.Underlying().(type) {
	case *types.Pointer, *types.Interface:
	default:
		return false
	}
	ms := types.NewMethodSet(t)
	for _, name := range [...]string{"GetName", "GetNamespace", "GetResourceVersion", "SetResourceVersion"} {
		if ms.Lookup(nil, name) == nil {
			return false
		}
	}
	return true
}

// readInto returns the index of the argument a read fills, -1 when the
// call is not one: controller-runtime's Get (and any method named Get, a
// project's wrapper) fills its object argument, DeepCopyInto its only one.
func readInto(info *types.Info, call *ast.CallExpr) int {
	fn := callee(info, call)
	if fn == nil || fn.Signature().Recv() == nil {
		return -1
	}
	switch fn.Name() {
	case "Get":
		params := fn.Signature().Params()
		for i := range params.Len() {
			if isObjectType(params.At(i).Type()) && i < len(call.Args) {
				return i
			}
		}
	case "DeepCopyInto":
		if len(call.Args) == 1 {
			return 0
		}
	}
	return -1
}

// isReadReturning reports whether a call is a Get returning a Kubernetes
// object first and an error last: a typed client's, the dynamic client's,
// a generated clientset's, a project's wrapper's.
func isReadReturning(info *types.Info, call *ast.CallExpr) bool {
	fn := callee(info, call)
	if fn == nil || fn.Name() != "Get" || fn.Signature().Recv() == nil {
		return false
	}
	res := fn.Signature().Results()
	return res.Len() == 2 && isObjectType(res.At(0).Type()) && isError(res.At(1).Type())
}

// isCachedRead reports whether a call reads an informer's cache: Get or
// List of a lister (a method of a package whose path has a listers
// element), or Get, GetByKey, List or ByIndex of client-go's cache.Store
// and cache.Indexer.
func isCachedRead(info *types.Info, call *ast.CallExpr) bool {
	fn := callee(info, call)
	if fn == nil || fn.Pkg() == nil || fn.Signature().Recv() == nil {
		return false
	}
	path := fn.Pkg().Path()
	if strings.Contains(path, "/listers/") || strings.HasSuffix(path, "/listers") {
		return fn.Name() == "Get" || fn.Name() == "List"
	}
	if path != clientGoCache {
		return false
	}
	named := recvNamed(fn)
	if named == nil || (named.Obj().Name() != "Store" && named.Obj().Name() != "Indexer") {
		return false
	}
	switch fn.Name() {
	case "Get", "GetByKey", "List", "ByIndex":
		return true
	}
	return false
}

// isControllerRuntimeGet reports whether a call is controller-runtime's
// client.Reader.Get, which fills its last argument.
func isControllerRuntimeGet(info *types.Info, call *ast.CallExpr) bool {
	fn := callee(info, call)
	return fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == ctrlClient && fn.Name() == "Get" &&
		fn.Signature().Recv() != nil
}

func isError(t types.Type) bool {
	return types.Identical(t, types.Universe.Lookup("error").Type())
}
