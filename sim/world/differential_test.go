package world_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/world"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }

// The world differential: seeded random workload sequences run on the fake
// backend's world (virtual time) and on envtest's kube-controller-manager
// (real time), each settled state compared with what the sequence implies
// (expect). The model is the claim; envtest checks the claim against the
// real controllers, fake checks the world against it, hundreds of times.

// opKind is one step a workload takes.
type opKind string

const (
	opCreate   opKind = "create"   // a Deployment of Replicas, template revision 0
	opScale    opKind = "scale"    // spec.replicas = Replicas
	opDelete   opKind = "delete"   // with Policy
	opRecreate opKind = "recreate" // delete with Policy, create again at once
	opTemplate opKind = "template" // the pod template's next revision
	opPause    opKind = "pause"
	opResume   opKind = "resume"
	opKill     opKind = "kill" // delete Replicas of its pods behind its back
)

// op is one step; Gap is the time left to the world before the next one.
type op struct {
	Kind     opKind
	Name     string
	Replicas int32
	Policy   metav1.DeletionPropagation
	Gap      time.Duration
}

func (o op) String() string {
	s := string(o.Kind) + " " + o.Name
	switch o.Kind {
	case opCreate, opScale, opKill:
		s += fmt.Sprintf(" %d", o.Replicas)
	case opDelete, opRecreate:
		s += " " + string(o.Policy)
	}
	return s + fmt.Sprintf(" +%v", o.Gap)
}

// workload is one generated sequence: data, printed in a failure, short
// enough to cut by hand into a regression.
type workload struct {
	Seed uint64
	Ops  []op
}

func (w workload) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workload seed %d:", w.Seed)
	for i, o := range w.Ops {
		fmt.Fprintf(&b, "\n  %2d %s", i, o)
	}
	return b.String()
}

// dmodel is what the sequence implies for one name.
type dmodel struct {
	exists    bool
	replicas  int32
	paused    bool
	rev       int // the template's revision
	rolledRev int // the revision the pods run
	gen       int64
	orphans   int32 // pods left by an orphaning delete, not adopted again
}

var names = []string{"d0", "d1", "d2"}
var policies = []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan}

// generate draws a valid sequence of 4 to 10 steps: each step applies to
// the state the steps before it leave.
func generate(seed uint64) workload {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	state := map[string]*dmodel{}
	for _, n := range names {
		state[n] = &dmodel{}
	}
	gaps := []time.Duration{0, 0, 50 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second}
	w := workload{Seed: seed}
	for len(w.Ops) < 4+r.IntN(7) {
		name := names[r.IntN(len(names))]
		d := state[name]
		o := op{Name: name, Gap: gaps[r.IntN(len(gaps))]}
		if !d.exists {
			o.Kind, o.Replicas = opCreate, r.Int32N(5)
		} else {
			kinds := []opKind{opScale, opScale, opDelete, opRecreate, opTemplate, opKill}
			if d.paused {
				kinds = append(kinds, opResume)
			} else {
				kinds = append(kinds, opPause)
			}
			o.Kind = kinds[r.IntN(len(kinds))]
			switch o.Kind {
			case opScale:
				o.Replicas = r.Int32N(5)
				if o.Replicas == d.replicas {
					o.Replicas = (o.Replicas + 1) % 5
				}
			case opDelete, opRecreate:
				o.Policy = policies[r.IntN(len(policies))]
			case opKill:
				if d.replicas == 0 {
					o.Kind, o.Replicas = opScale, 1+r.Int32N(4)
				} else {
					o.Replicas = 1 + r.Int32N(d.replicas)
				}
			}
		}
		apply(state, o)
		w.Ops = append(w.Ops, o)
	}
	return w
}

// apply moves the model by one step.
func apply(state map[string]*dmodel, o op) {
	d := state[o.Name]
	switch o.Kind {
	case opCreate:
		// A new Deployment adopts the ReplicaSet an orphaning delete
		// left (its selector matches), and so those pods (the driver
		// deletes it only once it has).
		*d = dmodel{exists: true, replicas: o.Replicas, gen: 1}
	case opScale:
		d.replicas, d.gen = o.Replicas, d.gen+1
	case opDelete, opRecreate:
		orphans := int32(0)
		if o.Policy == metav1.DeletePropagationOrphan {
			orphans = d.replicas
		}
		*d = dmodel{orphans: orphans}
		if o.Kind == opRecreate {
			apply(state, op{Kind: opCreate, Name: o.Name, Replicas: 2})
		}
	case opTemplate:
		d.rev, d.gen = d.rev+1, d.gen+1
		if !d.paused {
			d.rolledRev = d.rev
		}
	case opPause:
		d.paused, d.gen = true, d.gen+1
	case opResume:
		d.paused, d.gen, d.rolledRev = false, d.gen+1, d.rev
	case opKill:
	}
}

// settled is the state a controller could observe once everything has
// settled, normalised so that both backends say it alike.
type settled struct {
	Deployments map[string]dstate
	// Orphans counts, per app label, the live pods no Deployment controls.
	Orphans map[string]int32
	// Dangling pods name a controller that is gone; Terminating pods are
	// being deleted.
	Dangling, Terminating int
}

type dstate struct {
	// Pods the Deployment controls (directly on fake, through a
	// ReplicaSet on envtest), and those running its current template.
	Pods, OnTemplate                                 int32
	Generation, ObservedGeneration                   int64
	Replicas, Updated, Ready, Available, Unavailable int32
	Terminating                                      string // status.terminatingReplicas, "nil" when absent
	Paused                                           bool
	AvailableCondition, ProgressingCondition         string // "status/reason"
}

// expect is the settled state the sequence implies.
func expect(w workload) settled {
	state := map[string]*dmodel{}
	for _, n := range names {
		state[n] = &dmodel{}
	}
	for _, o := range w.Ops {
		apply(state, o)
	}
	s := settled{Deployments: map[string]dstate{}, Orphans: map[string]int32{}}
	for _, n := range names {
		d := state[n]
		if d.orphans > 0 {
			s.Orphans[n] = d.orphans
		}
		if !d.exists {
			continue
		}
		onTemplate, updated := d.replicas, d.replicas
		progressing := "True/NewReplicaSetAvailable"
		if d.paused {
			progressing = "Unknown/DeploymentPaused"
		}
		if d.rolledRev != d.rev {
			// Paused since the template changed: no ReplicaSet for the
			// new template yet.
			onTemplate, updated = 0, 0
		}
		s.Deployments[n] = dstate{
			Pods: d.replicas, OnTemplate: onTemplate,
			Generation: d.gen, ObservedGeneration: d.gen,
			Replicas: d.replicas, Updated: updated, Ready: d.replicas, Available: d.replicas,
			Terminating: "0", Paused: d.paused,
			AvailableCondition: "True/MinimumReplicasAvailable", ProgressingCondition: progressing,
		}
	}
	return s
}

const revAnnotation = "converge.dev/rev"

func newDeployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}, Annotations: map[string]string{revAnnotation: "0"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
			},
		},
	}
}

// driver runs a workload against one backend; poll waits (virtual time
// on fake, real time on envtest).
type driver struct {
	c  kubernetes.Interface
	ns string
}

// until polls cond every 20ms for up to a minute.
func until(cond func() (bool, error)) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d driver) run(ctx context.Context, w workload) error {
	for i, o := range w.Ops {
		if err := d.step(ctx, o); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, o, err)
		}
		time.Sleep(o.Gap)
	}
	return nil
}

func (d driver) step(ctx context.Context, o op) error {
	deploys := d.c.AppsV1().Deployments(d.ns)
	patch := func(p string) error {
		_, err := deploys.Patch(ctx, o.Name, types.MergePatchType, []byte(p), metav1.PatchOptions{})
		return err
	}
	switch o.Kind {
	case opCreate:
		return d.create(ctx, o.Name, o.Replicas)
	case opScale:
		return patch(fmt.Sprintf(`{"spec":{"replicas":%d}}`, o.Replicas))
	case opDelete, opRecreate:
		// Pods an orphaning delete left go with this Deployment only once
		// its controller has adopted them; deleted first, it leaves them
		// orphaned, on kube-controller-manager too. Wait for the adoption
		// the model counts on, so the outcome does not hang on the
		// controllers' speed.
		if err := d.adopted(ctx, o.Name); err != nil {
			return err
		}
		if o.Policy == metav1.DeletePropagationOrphan {
			// Known difference: fake has no ReplicaSets, so pods an
			// orphaning delete leaves are those that exist at that
			// instant, while envtest's orphaned ReplicaSet keeps its
			// count. Orphan a settled Deployment, where both agree.
			if err := d.settledAt(ctx, o.Name, false); err != nil {
				return err
			}
		}
		if err := deploys.Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(o.Policy)}); err != nil {
			return err
		}
		if o.Kind == opRecreate {
			return d.create(ctx, o.Name, 2)
		}
		return nil
	case opTemplate:
		dep, err := deploys.Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rev := dep.Spec.Template.Annotations[revAnnotation]
		return patch(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"%s+"}}}}}`, revAnnotation, rev))
	case opPause:
		// A Deployment paused before its first ReplicaSet exists never
		// gets one: pause one whose template has rolled out, so the
		// outcome does not hang on the controllers' speed.
		if err := d.settledAt(ctx, o.Name, true); err != nil {
			return err
		}
		return patch(`{"spec":{"paused":true}}`)
	case opResume:
		return patch(`{"spec":{"paused":false}}`)
	case opKill:
		pods, err := d.c.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + o.Name})
		if err != nil {
			return err
		}
		killed := int32(0)
		for _, p := range pods.Items {
			if killed == o.Replicas {
				break
			}
			if p.DeletionTimestamp != nil {
				continue
			}
			if err := d.c.CoreV1().Pods(d.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			killed++
		}
	}
	return nil
}

// create creates the Deployment once its name is free: a foreground or
// orphaning delete keeps it for a while, as a controller recreating it
// would find.
func (d driver) create(ctx context.Context, name string, replicas int32) error {
	return until(func() (bool, error) {
		_, err := d.c.AppsV1().Deployments(d.ns).Create(ctx, newDeployment(name, replicas), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// settledAt waits until the Deployment has all its replicas available,
// and, if rolled, on its current template.
func (d driver) settledAt(ctx context.Context, name string, rolled bool) error {
	return until(func() (bool, error) {
		dep, err := d.c.AppsV1().Deployments(d.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := ptr.Deref(dep.Spec.Replicas, 1)
		s := dep.Status
		if s.ObservedGeneration != dep.Generation || (rolled && s.UpdatedReplicas != want) || s.Replicas != want || s.AvailableReplicas != want {
			return false, nil
		}
		// The status may not have seen a pod killed just now.
		pods, err := d.c.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		ready := int32(0)
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
			if world.PodReady(&p) {
				ready++
			}
		}
		return ready == want && len(pods.Items) == int(want), nil
	})
}

// adopted waits until no live pod labelled for the Deployment is an
// orphan: each has a controller, or a ReplicaSet that has one. Pods whose
// owner is gone are the garbage collector's, not orphans.
func (d driver) adopted(ctx context.Context, name string) error {
	return until(func() (bool, error) {
		pods, err := d.c.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		rss, err := d.c.AppsV1().ReplicaSets(d.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			owner := metav1.GetControllerOf(&p)
			if owner != nil && owner.Kind == "ReplicaSet" {
				i := slices.IndexFunc(rss.Items, func(rs appsv1.ReplicaSet) bool { return rs.UID == owner.UID })
				if i < 0 {
					continue
				}
				owner = metav1.GetControllerOf(&rss.Items[i])
			}
			if owner == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// observe reads the settled state as a controller could: pods counted
// for the Deployment that controls them, through its ReplicaSet where
// there is one.
func (d driver) observe(ctx context.Context) (settled, error) {
	s := settled{Deployments: map[string]dstate{}, Orphans: map[string]int32{}}
	deps, err := d.c.AppsV1().Deployments(d.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	rss, err := d.c.AppsV1().ReplicaSets(d.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	pods, err := d.c.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	byUID := map[types.UID]*appsv1.Deployment{}
	for i := range deps.Items {
		byUID[deps.Items[i].UID] = &deps.Items[i]
	}
	rsByUID := map[types.UID]*appsv1.ReplicaSet{}
	for i := range rss.Items {
		rsByUID[rss.Items[i].UID] = &rss.Items[i]
	}
	count := map[types.UID][2]int32{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			s.Terminating++
			continue
		}
		owner := metav1.GetControllerOf(&p)
		if owner != nil && owner.Kind == "ReplicaSet" {
			rs, ok := rsByUID[owner.UID]
			if !ok {
				s.Dangling++
				continue
			}
			owner = metav1.GetControllerOf(rs)
		}
		if owner == nil {
			s.Orphans[p.Labels["app"]]++
			continue
		}
		dep, ok := byUID[owner.UID]
		if !ok {
			s.Dangling++
			continue
		}
		c := count[dep.UID]
		c[0]++
		if p.Annotations[revAnnotation] == dep.Spec.Template.Annotations[revAnnotation] {
			c[1]++
		}
		count[dep.UID] = c
	}
	for _, dep := range deps.Items {
		if dep.DeletionTimestamp != nil {
			continue // still going: not settled
		}
		st := dep.Status
		terminating := "nil"
		if st.TerminatingReplicas != nil {
			terminating = fmt.Sprint(*st.TerminatingReplicas)
		}
		cond := func(t appsv1.DeploymentConditionType) string {
			for _, c := range st.Conditions {
				if c.Type == t {
					return string(c.Status) + "/" + c.Reason
				}
			}
			return "none"
		}
		s.Deployments[dep.Name] = dstate{
			Pods: count[dep.UID][0], OnTemplate: count[dep.UID][1],
			Generation: dep.Generation, ObservedGeneration: st.ObservedGeneration,
			Replicas: st.Replicas, Updated: st.UpdatedReplicas, Ready: st.ReadyReplicas,
			Available: st.AvailableReplicas, Unavailable: st.UnavailableReplicas,
			Terminating: terminating, Paused: dep.Spec.Paused,
			AvailableCondition: cond(appsv1.DeploymentAvailable), ProgressingCondition: cond(appsv1.DeploymentProgressing),
		}
	}
	return s, nil
}

// runFake runs w on the fake backend's world in a bubble and returns the
// settled state.
func runFake(t *testing.T, w workload) (got settled) {
	synctest.Test(t, func(t *testing.T) {
		b, err := fake.New(fake.Config{})
		require.NoError(t, err)
		env, err := b.Start(context.Background())
		require.NoError(t, err)
		client, err := env.InProcess.NewSharingClient()
		require.NoError(t, err)
		_, ctx := runWorld(t, world.Config{
			Client: client, Namespace: env.Namespace, Readiness: world.Model{Kind: world.ReadyAfterDelay, Delay: time.Second},
			Seed: int64(w.Seed), Scheduler: true, Deployments: true,
		}, b.Stop)
		d := driver{c: env.Observer, ns: env.Namespace}
		require.NoError(t, d.run(ctx, w), w.String())
		// Settled: well past every readiness delay, every goroutine idle.
		time.Sleep(time.Minute)
		synctest.Wait()
		got, err = d.observe(ctx)
		require.NoError(t, err)
	})
	return got
}

// runEnvtest runs w in a namespace of the shared control plane and
// returns the state once it equals want, or the last seen at the
// deadline.
func runEnvtest(t *testing.T, cp *envtest.ControlPlane, w workload, want settled) settled {
	b, err := envtest.NewBackend(cp, "differential-")
	require.NoError(t, err)
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	_, ctx := runWorld(t, world.Config{
		Client: env.Observer, Namespace: env.Namespace, Readiness: world.Model{Kind: world.ReadyAfterDelay, Delay: time.Second},
		Seed: int64(w.Seed), Scheduler: true,
	}, b.Stop)
	d := driver{c: env.Observer, ns: env.Namespace}
	require.NoError(t, d.run(ctx, w), w.String())
	var got settled
	_ = until(func() (bool, error) {
		got, err = d.observe(ctx)
		return err == nil && equalSettled(got, want), err
	})
	return got
}

func equalSettled(a, b settled) bool {
	return maps.Equal(a.Deployments, b.Deployments) && maps.Equal(a.Orphans, b.Orphans) &&
		a.Dangling == b.Dangling && a.Terminating == b.Terminating
}

func diffSettled(want, got settled) string {
	var lines []string
	for _, n := range slices.Sorted(maps.Keys(mergeKeys(want.Deployments, got.Deployments))) {
		w, wok := want.Deployments[n]
		g, gok := got.Deployments[n]
		switch {
		case wok != gok:
			lines = append(lines, fmt.Sprintf("%s: want exists=%v, got exists=%v", n, wok, gok))
		case w != g:
			lines = append(lines, fmt.Sprintf("%s:\n    want %+v\n    got  %+v", n, w, g))
		}
	}
	if !maps.Equal(want.Orphans, got.Orphans) {
		lines = append(lines, fmt.Sprintf("orphans: want %v, got %v", want.Orphans, got.Orphans))
	}
	if want.Dangling != got.Dangling || want.Terminating != got.Terminating {
		lines = append(lines, fmt.Sprintf("dangling/terminating: want %d/%d, got %d/%d", want.Dangling, want.Terminating, got.Dangling, got.Terminating))
	}
	return strings.Join(lines, "\n")
}

func mergeKeys[V any](a, b map[string]V) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// TestWorldDifferentialFake runs hundreds of generated workloads on the
// fake world; each must settle where the model says.
func TestWorldDifferentialFake(t *testing.T) {
	n := 200
	if !testing.Short() {
		n = 1000
	}
	failed := 0
	for seed := range uint64(n) {
		w := generate(seed)
		want := expect(w)
		got := runFake(t, w)
		if !equalSettled(want, got) {
			failed++
			t.Errorf("%s\n%s", w, diffSettled(want, got))
		}
	}
	t.Logf("fake world: %d generated workloads, %d differ from the model", n, failed)
}

// TestWorldDifferentialEnvtest runs a seeded sample of the same workloads
// on kube-controller-manager and on the fake world: each settled state is
// compared with the model and with the other's, so the claim the fake test
// checks hundreds of times is the real controllers' too.
func TestWorldDifferentialEnvtest(t *testing.T) {
	cp := simtest.Require(t)
	n := 3
	if !testing.Short() {
		n = 24
	}
	t.Run("sample", func(t *testing.T) {
		for i := range n {
			seed := uint64(1000 + i*37)
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				w := generate(seed)
				want := expect(w)
				got := runEnvtest(t, cp, w, want)
				if !equalSettled(want, got) {
					t.Errorf("%s\n%s", w, diffSettled(want, got))
				}
				if onFake := runFake(t, w); !equalSettled(got, onFake) {
					t.Errorf("the fake world settles apart from kube-controller-manager (want: envtest's, got: fake's): %s\n%s", w, diffSettled(got, onFake))
				}
			})
		}
	})
	t.Logf("envtest: %d generated workloads, each also on the fake world", n)
}
