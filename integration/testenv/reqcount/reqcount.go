// Package reqcount records the requests a Kubernetes client sends to the
// server at the HTTP transport: what reaches the wire, client-go's own
// retries included, not what a retry loop believes it did. A [Counter]
// counts them by verb and resource, and by how they ended (status code,
// [Class] of failure); it can keep each one with its timing, and shows
// those in flight.
package reqcount

import (
	"maps"
	"net/http"
	"strings"
)

// Key is a Kubernetes verb (get, list, watch, create, update, patch,
// delete, deletecollection) and the resource it was sent to
// ("configmaps"); non-resource requests (/version, /healthz) have the
// resource "".
type Key struct {
	Verb     string
	Resource string
}

// Counts is a number of requests per Key.
type Counts map[Key]int

// Sub returns c minus before, per Key: the requests sent between two
// snapshots.
func (c Counts) Sub(before Counts) Counts {
	d := Counts{}
	maps.Copy(d, c)
	for k, n := range before {
		d[k] -= n
		if d[k] == 0 {
			delete(d, k)
		}
	}
	return d
}

// Resource returns the requests to resource, of any verb.
func (c Counts) Resource(resource string) int {
	n := 0
	for k, v := range c {
		if k.Resource == resource {
			n += v
		}
	}
	return n
}

// Classify returns the verb and resource of req as the apiserver's
// request-info parser sees them, for the paths clients of the core and
// named API groups use: /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]]
// and /apis/GROUP/VERSION/... . A namespace itself
// (/api/v1/namespaces/NS) is the resource "namespaces".
func Classify(req *http.Request) Key {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:] // api, v1
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:] // apis, group, version
	default:
		return Key{Verb: strings.ToLower(req.Method)}
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // a namespaced resource
	}
	resource, named := parts[0], len(parts) >= 2
	var verb string
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case isWatch(req):
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return Key{Verb: verb, Resource: resource}
}

// isWatch reports whether req asks for a watch (?watch=true or =1), as
// the apiserver decides it.
func isWatch(req *http.Request) bool {
	switch strings.ToLower(req.URL.Query().Get("watch")) {
	case "1", "true":
		return true
	}
	return false
}
