// Package v1 is a stub of k8s.io/api/core/v1.
package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

type Pod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Spec   PodSpec
	Status PodStatus
}

type PodSpec struct{ NodeName string }
type PodStatus struct{ Phase string }

func (p *Pod) DeepCopy() *Pod { q := *p; return &q }

func (p *Pod) DeepCopyObject() interface{} { return p.DeepCopy() }

type ConfigMap struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Data map[string]string
}

func (c *ConfigMap) DeepCopy() *ConfigMap { d := *c; return &d }

func (c *ConfigMap) DeepCopyObject() interface{} { return c.DeepCopy() }
