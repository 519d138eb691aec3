package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/poll"
)

// The server's concurrency: kube-apiserver's defaults, given explicitly,
// since the fleet's seats are computed from them.
const (
	maxRequestsInflight         = 400
	maxMutatingRequestsInflight = 200
)

// serverFlags start the kube-apiserver with API Priority and Fairness on
// (the default, given explicitly), RBAC as the only authorizer (the test
// server's default is AlwaysAllow), and the default server concurrency.
var serverFlags = []string{
	"--enable-priority-and-fairness=true",
	"--authorization-mode=RBAC",
	"--max-requests-inflight=" + strconv.Itoa(maxRequestsInflight),
	"--max-mutating-requests-inflight=" + strconv.Itoa(maxMutatingRequestsInflight),
}

// The fleet's identity and its priority level's shape: one service
// account for every process; a level of its own with seats execution
// seats, neither lending nor borrowing any, queues queues, a hand of
// handSize (so the one flow, by user, queues in at most handSize queues:
// seats + handSize x queue length limit requests of it at once).
const (
	serviceAccount = "fleet"
	flowSchemaName = "kuberetry-fleet"
	seats          = 10
	queues         = 64
	handSize       = 4
	// precedence is the FlowSchema's: before the suggested
	// "service-accounts" (9000) and the catch-alls.
	precedence = 1000
)

// level is the fleet's identity on the server and its current priority
// level.
type level struct {
	admin kubernetes.Interface
	// impersonated is the admin config acting as the service account: the
	// base of every process's config.
	impersonated *rest.Config
	ns           string
	// shares is the level's nominal concurrency shares: what gives it
	// seats seats beside the suggested levels.
	shares int32
	// name and uid are the current PriorityLevelConfiguration's.
	name string
	uid  types.UID
}

// newLevel creates the service account in ns, a Role letting it get and
// update ConfigMaps there and its RoleBinding, and returns the admin
// config cfg acting as it, and the shares that give its level seats.
func newLevel(ctx context.Context, admin kubernetes.Interface, cfg *rest.Config, ns string) (*level, error) {
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: serviceAccount},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create service account: %w", err)
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: serviceAccount},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create role: %w", err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: serviceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: serviceAccount},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: serviceAccount}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create role binding: %w", err)
	}
	imp := rest.CopyConfig(cfg)
	imp.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	l := &level{admin: admin, impersonated: imp, ns: ns}
	pls, err := admin.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list priority levels: %w", err)
	}
	others := 0
	for _, pl := range pls.Items {
		if lim := pl.Spec.Limited; lim != nil && lim.NominalConcurrencyShares != nil {
			others += int(*lim.NominalConcurrencyShares)
		}
	}
	if l.shares, err = sharesFor(seats, maxRequestsInflight+maxMutatingRequestsInflight, others); err != nil {
		return nil, err
	}
	return l, nil
}

// sharesFor returns the fewest nominal concurrency shares that give a
// priority level want seats on a server of serverCL seats whose other
// levels hold others shares: kube-apiserver gives a level
// ceil(serverCL x shares / all shares).
func sharesFor(want, serverCL, others int) (int32, error) {
	for s := 1; s <= serverCL; s++ {
		if int(math.Ceil(float64(serverCL)*float64(s)/float64(others+s))) == want {
			return int32(s), nil
		}
	}
	return 0, fmt.Errorf("no nominal concurrency shares give %d seats of %d beside %d shares", want, serverCL, others)
}

// use makes a new priority level named name the fleet's (a fresh one per
// fleet run: kube-apiserver keeps a level's Retry-After, raised by its
// drops, until it drops again), with queueLength the length limit of
// each queue; it deletes the previous one and waits until the server
// classifies the service account's requests into the new level and gives
// it seats seats.
func (l *level) use(ctx context.Context, name string, queueLength int32) error {
	pl, err := l.admin.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: &l.shares,
				LendablePercent:          ptr.To(int32(0)),
				BorrowingLimitPercent:    ptr.To(int32(0)),
				LimitResponse: flowcontrolv1.LimitResponse{
					Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{
						Queues: queues, HandSize: handSize, QueueLengthLimit: queueLength,
					},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create priority level %s: %w", name, err)
	}
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: flowSchemaName},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name},
			MatchingPrecedence:         precedence,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{
					Kind:           flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: l.ns, Name: serviceAccount},
				}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"},
				}},
			}},
		},
	}
	// The apiserver's APF controller writes the schema's status too: a
	// Conflict reads it afresh and points it again.
	old, _, err := retry.Ensure(ctx, retry.DefaultRetry, l.admin.FlowcontrolV1().FlowSchemas(), fs,
		func(s *flowcontrolv1.FlowSchema) error { s.Spec = fs.Spec; return nil })
	if err != nil {
		return fmt.Errorf("flow schema %s: %w", flowSchemaName, err)
	}
	if l.name != "" {
		if err := l.admin.FlowcontrolV1().PriorityLevelConfigurations().Delete(ctx, l.name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete priority level %s: %w", l.name, err)
		}
	}
	l.name, l.uid = name, pl.UID
	client, err := rest.HTTPClientFor(l.impersonated)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	var got string
	err = poll.Until(ctx, 100*time.Millisecond, 30*time.Second, func() bool {
		got = l.check(ctx, client, old.UID)
		return got == ""
	})
	if err != nil {
		return fmt.Errorf("priority level %s not in effect: %s", name, got)
	}
	return nil
}

// check returns "" when a request of the service account is classified
// into the flow schema of UID fs and the current level, and the server
// gives that level seats seats (the nominal, lower and upper limits);
// else what is not so yet.
func (l *level) check(ctx context.Context, client *http.Client, fs types.UID) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		l.impersonated.Host+"/api/v1/namespaces/"+l.ns+"/configmaps/apf-check", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	gotFS := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)
	gotPL := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
	if gotFS != string(fs) || gotPL != string(l.uid) {
		return fmt.Sprintf("the service account's request went to flow schema %q, level %q", gotFS, gotPL)
	}
	m, err := l.metrics(ctx)
	if err != nil {
		return err.Error()
	}
	for _, name := range []string{"nominal", "lower", "upper"} {
		if n := m.sum("apiserver_flowcontrol_"+name+"_limit_seats", "priority_level", l.name); n != seats {
			return fmt.Sprintf("its %s limit is %v seats, want %d", name, n, seats)
		}
	}
	return ""
}

// metrics reads the server's metrics.
func (l *level) metrics(ctx context.Context) (metrics, error) {
	b, err := l.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the server's metrics: %w", err)
	}
	return metrics(strings.Split(string(b), "\n")), nil
}

// metrics are the lines of a Prometheus text exposition.
type metrics []string

var label = regexp.MustCompile(`(\w+)="([^"]*)"`)

// sum returns the sum of the samples of name whose labels include each
// key and value of kv (pairs).
func (m metrics) sum(name string, kv ...string) float64 {
	total := 0.0
	for _, line := range m {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		have := map[string]string{}
		for _, m := range label.FindAllStringSubmatch(labels, -1) {
			have[m[1]] = m[2]
		}
		match := true
		for i := 0; i+1 < len(kv); i += 2 {
			match = match && have[kv[i]] == kv[i+1]
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); match && err == nil {
			total += v
		}
	}
	return total
}

// rejected returns the requests the current level rejected, by reason
// ("queue-full", "time-out", ...), and the requests it dispatched.
func (l *level) rejected(ctx context.Context) (map[string]float64, float64, error) {
	m, err := l.metrics(ctx)
	if err != nil {
		return nil, 0, err
	}
	out := map[string]float64{}
	for _, reason := range []string{"queue-full", "time-out", "concurrency-limit", "cancelled"} {
		if n := m.sum("apiserver_flowcontrol_rejected_requests_total", "priority_level", l.name, "reason", reason); n > 0 {
			out[reason] = n
		}
	}
	return out, m.sum("apiserver_flowcontrol_dispatched_requests_total", "priority_level", l.name), nil
}
