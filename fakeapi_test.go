package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/url"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Counter is a small API object for the examples, shaped like every
// Kubernetes type: TypeMeta, ObjectMeta (which holds the resourceVersion)
// and its own fields. *Counter is a retry.Object.
type Counter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Count             int    `json:"count,omitempty"`
	Owner             string `json:"owner,omitempty"`
	Status            string `json:"status,omitempty"` // written by UpdateStatus only
}

// DeepCopyObject copies c, as the generated deep-copy functions do.
func (c *Counter) DeepCopyObject() runtime.Object {
	if c == nil {
		return nil
	}
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// counters keeps Counters the way an API server does: Get returns a copy,
// and an Update that carries a resourceVersion other than the stored one
// fails with a 409 Conflict, as does a patch that names one; an Update
// without one is applied unconditionally, over whatever is stored, as the
// apiserver does for most kinds (ConfigMaps, Deployments, ...). Update keeps the stored status
// and UpdateStatus writes nothing else, as for a kind with a status
// subresource. It counts the requests it serves.
type counters struct {
	objs          map[string]*Counter
	version       int
	gets, updates int
	creates       int
	statusUpdates int
	patches       int
	lastPatch     []byte  // the data of the last patch served
	beforeUpdate  func()  // if set, runs before each update or status update: another writer
	beforeCreate  func()  // if set, runs before each create: another writer
	beforePatch   func()  // if set, runs before each patch: another writer
	failGets      []error // errors for the next gets, in order
	failCreates   []error // errors for the next creates, in order
	loseReply     int     // the number of the update that is applied but whose reply is lost
}

func newCounters(names ...string) *counters {
	s := &counters{objs: map[string]*Counter{}}
	for _, n := range names {
		s.version++
		s.objs[n] = &Counter{ObjectMeta: metav1.ObjectMeta{Name: n, ResourceVersion: strconv.Itoa(s.version)}}
	}
	return s
}

var counterResource = schema.GroupResource{Group: "example.com", Resource: "counters"}

func (s *counters) Get(_ context.Context, name string) (*Counter, error) {
	s.gets++
	if len(s.failGets) > 0 {
		err := s.failGets[0]
		s.failGets = s.failGets[1:]
		return nil, err
	}
	obj, ok := s.objs[name]
	if !ok {
		return nil, apierrors.NewNotFound(counterResource, name)
	}
	return obj.DeepCopyObject().(*Counter), nil
}

func (s *counters) Update(_ context.Context, c *Counter) (*Counter, error) {
	s.updates++
	stored, err := s.replace(c)
	if err != nil {
		return nil, err
	}
	status := stored.Status
	stored = c.DeepCopyObject().(*Counter)
	stored.Status = status
	s.store(stored)
	if s.updates == s.loseReply {
		return nil, &url.Error{Op: "Put", URL: "https://apiserver/counters/" + c.Name, Err: io.EOF}
	}
	return stored.DeepCopyObject().(*Counter), nil
}

// Create stores a new Counter, as the API server does: AlreadyExists when
// the name is taken, and a refusal of an object that carries a
// resourceVersion.
func (s *counters) Create(_ context.Context, c *Counter) (*Counter, error) {
	s.creates++
	if s.beforeCreate != nil {
		s.beforeCreate()
	}
	if len(s.failCreates) > 0 {
		err := s.failCreates[0]
		s.failCreates = s.failCreates[1:]
		return nil, err
	}
	if c.ResourceVersion != "" {
		// The real apiserver answers with a 500 (v1.37).
		return nil, apierrors.NewInternalError(errors.New("resourceVersion should not be set on objects to be created"))
	}
	if _, ok := s.objs[c.Name]; ok {
		return nil, apierrors.NewAlreadyExists(counterResource, c.Name)
	}
	s.version++
	stored := c.DeepCopyObject().(*Counter)
	stored.ResourceVersion = strconv.Itoa(s.version)
	stored.UID = types.UID("uid-" + stored.ResourceVersion)
	s.objs[c.Name] = stored
	return stored.DeepCopyObject().(*Counter), nil
}

// UpdateStatus writes c's status, and nothing else, to the stored object,
// when c carries its resourceVersion.
func (s *counters) UpdateStatus(_ context.Context, c *Counter) (*Counter, error) {
	s.statusUpdates++
	stored, err := s.replace(c)
	if err != nil {
		return nil, err
	}
	stored = stored.DeepCopyObject().(*Counter)
	stored.Status = c.Status
	s.store(stored)
	return stored.DeepCopyObject().(*Counter), nil
}

// replace runs beforeUpdate and returns the stored object that c replaces,
// or the error the server gives a write of c: NotFound, or a Conflict when
// c carries a resourceVersion other than the stored one.
func (s *counters) replace(c *Counter) (*Counter, error) {
	if s.beforeUpdate != nil {
		s.beforeUpdate()
	}
	stored, ok := s.objs[c.Name]
	if !ok {
		return nil, apierrors.NewNotFound(counterResource, c.Name)
	}
	if c.ResourceVersion != "" && c.ResourceVersion != stored.ResourceVersion {
		return nil, apierrors.NewConflict(counterResource, c.Name, errors.New("the object has been modified"))
	}
	return stored, nil
}

// store keeps obj at a new resourceVersion.
func (s *counters) store(obj *Counter) {
	s.version++
	obj.ResourceVersion = strconv.Itoa(s.version)
	s.objs[obj.Name] = obj
}

// Patch applies an RFC 7386 merge patch to the stored object, as the API
// server does: a patch that sets metadata.resourceVersion applies only to
// that version, else it fails with a 409 Conflict.
func (s *counters) Patch(_ context.Context, name string, data []byte) (*Counter, error) {
	s.patches++
	s.lastPatch = data
	if s.beforePatch != nil {
		s.beforePatch()
	}
	stored, ok := s.objs[name]
	if !ok {
		return nil, apierrors.NewNotFound(counterResource, name)
	}
	var patch any
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if rv := patchVersion(patch); rv != "" && rv != stored.ResourceVersion {
		return nil, apierrors.NewConflict(counterResource, name, errors.New("the object has been modified"))
	}
	doc, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	var target any
	if err := json.Unmarshal(doc, &target); err != nil {
		return nil, err
	}
	merged, err := json.Marshal(mergeApply(target, patch))
	if err != nil {
		return nil, err
	}
	out := &Counter{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if out.Name != name {
		return nil, apierrors.NewBadRequest("the patch changes the name")
	}
	s.store(out)
	return out.DeepCopyObject().(*Counter), nil
}

// patchVersion returns the metadata.resourceVersion a merge patch sets, or "".
func patchVersion(patch any) string {
	p, _ := patch.(map[string]any)
	md, _ := p["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	return rv
}

// mergeApply is RFC 7386's MergePatch(target, patch), written from the
// RFC's pseudocode: an object patch merges member by member, a null
// member removes, anything else replaces. target is not modified.
func mergeApply(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	out := maps.Clone(t)
	for k, v := range p {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = mergeApply(out[k], v)
		}
	}
	return out
}

// touch is another writer: it changes name behind everyone's back.
func (s *counters) touch(name string) {
	s.version++
	obj := s.objs[name].DeepCopyObject().(*Counter)
	obj.Count += 100
	obj.ResourceVersion = strconv.Itoa(s.version)
	s.objs[name] = obj
}

// desired is an object as a reconciler builds it: a name, no resourceVersion.
func desired() *Counter { return &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}} }

// noMeta is a runtime.Object without object metadata.
type noMeta struct{ metav1.TypeMeta }

func (n *noMeta) DeepCopyObject() runtime.Object { c := *n; return &c }
