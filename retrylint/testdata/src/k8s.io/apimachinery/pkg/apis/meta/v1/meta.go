// Package v1 is a stub of apimachinery's metav1: what the analyzer's tests need.
package v1

type Object interface {
	GetName() string
	GetNamespace() string
	GetResourceVersion() string
	SetResourceVersion(string)
}

type TypeMeta struct{ Kind, APIVersion string }

type ObjectMeta struct {
	Name, Namespace, ResourceVersion string
	Labels                           map[string]string
}

func (m *ObjectMeta) GetName() string             { return m.Name }
func (m *ObjectMeta) GetNamespace() string        { return m.Namespace }
func (m *ObjectMeta) GetResourceVersion() string  { return m.ResourceVersion }
func (m *ObjectMeta) SetResourceVersion(v string) { m.ResourceVersion = v }

type GetOptions struct{}
type UpdateOptions struct{}
type CreateOptions struct{}
type DeleteOptions struct{}
type PatchOptions struct{}
type ListOptions struct{}
