// Package unstructured is a stub of apimachinery's.
package unstructured

type Unstructured struct{ Object map[string]interface{} }

func (u *Unstructured) GetName() string            { return "" }
func (u *Unstructured) GetNamespace() string       { return "" }
func (u *Unstructured) GetResourceVersion() string { return "" }
func (u *Unstructured) SetResourceVersion(string)  {}
func (u *Unstructured) DeepCopy() *Unstructured    { return u }
