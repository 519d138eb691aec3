package retry

import (
	"net/http"
	"strings"
)

// scopeKind tells what a scope stands for.
type scopeKind uint8

const (
	noScope       scopeKind = iota // a request without a resource scope
	loopsScope                     // every loop of a Budget that is not on the wire
	serverScope                    // a server: scheme and host
	resourceScope                  // a group's resource and a verb class on a server
)

// scope is what a Budget's hold is kept for: the loops of a Budget not on
// the wire, or on the wire a server, or one resource (or a group's
// discovery, resource "") of a server, read or written. It is a map key.
type scope struct {
	kind            scopeKind
	scheme, host    string
	group, resource string
	write           bool
}

// String names the scope in an error: "writes of deployments.apps",
// "reads of configmaps", "reads of metrics.k8s.io" (a group's discovery),
// "https://HOST:PORT".
func (s scope) String() string {
	switch s.kind {
	case serverScope:
		return s.scheme + "://" + s.host
	case resourceScope:
		verb := "reads of "
		if s.write {
			verb = "writes of "
		}
		switch {
		case s.resource == "":
			return verb + s.group
		case s.group == "":
			return verb + s.resource
		}
		return verb + s.resource + "." + s.group
	}
	return "the budget's calls"
}

// detached returns s with strings of its own, so that a table that keeps
// it does not keep the request's URL alive.
func (s scope) detached() scope {
	s.scheme, s.host = strings.Clone(s.scheme), strings.Clone(s.host)
	s.group, s.resource = strings.Clone(s.group), strings.Clone(s.resource)
	return s
}

// scopesOf returns the scopes of a request on the wire: its server, and
// its resource scope (kind noScope when the path names no resource of the
// Kubernetes API).
func scopesOf(req *http.Request) (server, resource scope) {
	u := req.URL
	server = scope{kind: serverScope, scheme: u.Scheme, host: u.Host}
	if group, res, ok := resourceOf(u.Path); ok {
		resource = server
		resource.kind, resource.group, resource.resource = resourceScope, group, res
		resource.write = req.Method != http.MethodGet && req.Method != http.MethodHead
	}
	return server, resource
}

// resourceOf parses a Kubernetes API path: /api/v1/... is the core group
// (""), /apis/GROUP/VERSION/... the group GROUP. The resource is the
// segment after namespaces/NAME/ for a namespaced resource, else the one
// right after the version; a subresource counts as its resource, and
// namespaces, namespaces/NAME, namespaces/NAME/status and
// namespaces/NAME/finalize are the resource namespaces. The legacy watch/
// segment after the version is skipped. /apis/GROUP and
// /apis/GROUP/VERSION, a group's discovery, are (GROUP, ""). Any other
// path (/api, /api/v1, /apis, /healthz, /version, /openapi/v2...) has no
// resource: ok is false.
func resourceOf(path string) (group, resource string, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(path, "/api/"):
		_, rest, _ = strings.Cut(path[len("/api/"):], "/") // the version
	case strings.HasPrefix(path, "/apis/"):
		group, rest, _ = strings.Cut(path[len("/apis/"):], "/")
		if group == "" {
			return "", "", false
		}
		_, rest, _ = strings.Cut(rest, "/") // the version
		if rest == "" {
			return group, "", true // discovery
		}
	default:
		return "", "", false
	}
	first, rest, _ := strings.Cut(rest, "/")
	if first == "watch" {
		first, rest, _ = strings.Cut(rest, "/")
	}
	if first != "namespaces" {
		return group, first, first != ""
	}
	_, rest, _ = strings.Cut(rest, "/") // the namespace's name
	switch sub, _, _ := strings.Cut(rest, "/"); sub {
	case "", "status", "finalize":
		return group, "namespaces", true
	default:
		return group, sub, true
	}
}
