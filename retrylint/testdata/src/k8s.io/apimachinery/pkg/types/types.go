// Package types is a stub of apimachinery's.
package types

type PatchType string

type NamespacedName struct{ Namespace, Name string }
