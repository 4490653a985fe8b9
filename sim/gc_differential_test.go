package sim_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

// The garbage collection differential: seeded random sequences of owner
// and dependent creations, deletions with each propagation policy,
// finalizers held and released, and the namespace's deletion, run on the
// fake store and on envtest's kube-controller-manager, each settled state
// compared with what the sequence implies (gcExpect).

type gcOp struct {
	Kind   string // "create", "delete", "release", "delete-namespace"
	Name   string
	Owners []string // create: the owners, all alive then
	Block  bool     // create: blockOwnerDeletion on each reference
	Hold   bool     // create: with a finalizer of its own
	Policy metav1.DeletionPropagation
	Gap    time.Duration
}

func (o gcOp) String() string {
	switch o.Kind {
	case "create":
		return fmt.Sprintf("create %s owners=%v block=%v hold=%v +%v", o.Name, o.Owners, o.Block, o.Hold, o.Gap)
	case "delete":
		return fmt.Sprintf("delete %s %s +%v", o.Name, o.Policy, o.Gap)
	case "release":
		return fmt.Sprintf("release %s +%v", o.Name, o.Gap)
	}
	return o.Kind
}

type gcSequence struct {
	Seed uint64
	Ops  []gcOp
}

func (s gcSequence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gc sequence seed %d:", s.Seed)
	for i, o := range s.Ops {
		fmt.Fprintf(&b, "\n  %2d %s", i, o)
	}
	return b.String()
}

const hold = "example.com/hold"

// gcGenerate draws a valid sequence: each name is created once, owners
// are alive (created, not deleted) when referenced, and a namespace
// deletion, when drawn, comes last.
func gcGenerate(seed uint64) gcSequence {
	r := rand.New(rand.NewPCG(seed, 0x6c))
	s := gcSequence{Seed: seed}
	var alive, created []string // names alive, and all created
	held := map[string]bool{}
	gaps := []time.Duration{0, 0, 20 * time.Millisecond, 200 * time.Millisecond}
	for next := 0; len(s.Ops) < 5+r.IntN(8); {
		o := gcOp{Gap: gaps[r.IntN(len(gaps))]}
		// Alive: what the steps so far leave, cascades included, so no
		// owner referenced is one the collector is taking away.
		alive = slices.Sorted(maps.Keys(gcExpect(s).Objects))
		switch k := r.IntN(10); {
		case k < 5 && next < 6 || len(alive) == 0:
			if next == 6 {
				return s
			}
			o.Kind, o.Name = "create", fmt.Sprintf("o%d", next)
			next++
			for _, a := range alive {
				if r.IntN(3) == 0 && len(o.Owners) < 2 {
					o.Owners = append(o.Owners, a)
				}
			}
			o.Block, o.Hold = r.IntN(2) == 0, r.IntN(3) == 0
			created = append(created, o.Name)
			held[o.Name] = o.Hold
		case k < 8:
			i := r.IntN(len(alive))
			o.Kind, o.Name = "delete", alive[i]
			o.Policy = policies[r.IntN(len(policies))]
			if o.Policy == metav1.DeletePropagationOrphan && sharesDependent(s.Ops, o.Name) {
				// Whether such a dependent survives hangs on whether the
				// collector has already taken a reference to another owner
				// deleted in the foreground: a race on both backends, not
				// a property of either.
				o.Policy = metav1.DeletePropagationBackground
			}
		default:
			var holders []string
			for _, n := range created {
				if held[n] {
					holders = append(holders, n)
				}
			}
			if len(holders) == 0 {
				continue
			}
			o.Kind, o.Name = "release", holders[r.IntN(len(holders))]
			held[o.Name] = false
		}
		s.Ops = append(s.Ops, o)
	}
	if r.IntN(4) == 0 {
		s.Ops = append(s.Ops, gcOp{Kind: "delete-namespace"})
	}
	return s
}

// sharesDependent: name owns an object that has another owner too.
func sharesDependent(ops []gcOp, name string) bool {
	return slices.ContainsFunc(ops, func(o gcOp) bool {
		return o.Kind == "create" && len(o.Owners) > 1 && slices.Contains(o.Owners, name)
	})
}

var policies = []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan}

// gcState is the settled state: each surviving object's owners, by name,
// and whether the namespace is there.
type gcState struct {
	Objects   map[string]string
	Namespace bool
}

// gcExpect is the settled state once every finalizer of the sequence's own
// is released: an object survives if nobody deleted it and it had no
// owners, or one of its owners survives; an orphaning delete takes the
// owner's reference from the dependents it has then; a survivor keeps its
// references to the survivors only; a deleted namespace takes everything.
func gcExpect(s gcSequence) gcState {
	owners := map[string][]string{}
	deleted := map[string]bool{}
	var order []string
	for _, o := range s.Ops {
		switch o.Kind {
		case "create":
			owners[o.Name] = slices.Clone(o.Owners)
			order = append(order, o.Name)
		case "delete":
			deleted[o.Name] = true
			if o.Policy == metav1.DeletePropagationOrphan {
				for n, refs := range owners {
					owners[n] = slices.DeleteFunc(refs, func(r string) bool { return r == o.Name })
				}
			}
		case "delete-namespace":
			return gcState{Objects: map[string]string{}}
		}
	}
	// Owners are created before their dependents: one pass in creation
	// order decides.
	survives := map[string]bool{}
	for _, n := range order {
		if deleted[n] {
			continue
		}
		refs := owners[n]
		survives[n] = len(refs) == 0 || slices.ContainsFunc(refs, func(r string) bool { return survives[r] })
	}
	st := gcState{Objects: map[string]string{}, Namespace: true}
	for n, ok := range survives {
		if ok {
			st.Objects[n] = strings.Join(slices.DeleteFunc(slices.Clone(owners[n]), func(r string) bool { return !survives[r] }), ",")
		}
	}
	return st
}

type gcDriver struct {
	c    kubernetes.Interface
	ns   string
	uids map[string]types.UID
}

func (d *gcDriver) run(ctx context.Context, s gcSequence) error {
	d.uids = map[string]types.UID{}
	if _, err := d.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	cms := d.c.CoreV1().ConfigMaps(d.ns)
	for i, o := range s.Ops {
		var err error
		switch o.Kind {
		case "create":
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: o.Name}}
			if o.Hold {
				cm.Finalizers = []string{hold}
			}
			for _, owner := range o.Owners {
				cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{
					APIVersion: "v1", Kind: "ConfigMap", Name: owner, UID: d.uids[owner], BlockOwnerDeletion: ptr.To(o.Block)})
			}
			cm, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if err == nil {
				d.uids[o.Name] = cm.UID
			}
		case "delete":
			err = cms.Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(o.Policy)})
		case "release":
			err = d.release(ctx, o.Name)
		case "delete-namespace":
			err = d.c.CoreV1().Namespaces().Delete(ctx, d.ns, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("step %d (%s): %w", i, o, err)
		}
		time.Sleep(o.Gap)
	}
	return nil
}

// release takes the sequence's own finalizer off name, leaving the garbage
// collector's.
func (d *gcDriver) release(ctx context.Context, name string) error {
	for {
		cm, err := d.c.CoreV1().ConfigMaps(d.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || !slices.Contains(cm.Finalizers, hold) {
			return err
		}
		cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return f == hold })
		_, err = d.c.CoreV1().ConfigMaps(d.ns).Update(ctx, cm, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// settle releases every finalizer of the sequence's own, until none is
// left, and returns the state once it equals want, or the last seen at the
// deadline (a minute: virtual on fake).
func (d *gcDriver) settle(ctx context.Context, want gcState) (gcState, error) {
	var got gcState
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := d.c.CoreV1().ConfigMaps(d.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return got, err
		}
		got = gcState{Objects: map[string]string{}}
		for _, cm := range list.Items {
			if slices.Contains(cm.Finalizers, hold) {
				if err := d.release(ctx, cm.Name); err != nil && !apierrors.IsNotFound(err) {
					return got, err
				}
			}
			if cm.Name == "kube-root-ca.crt" {
				continue // published by a root CA controller, where one runs
			}
			var refs []string
			for _, r := range cm.OwnerReferences {
				refs = append(refs, r.Name)
			}
			got.Objects[cm.Name] = strings.Join(refs, ",")
		}
		_, err = d.c.CoreV1().Namespaces().Get(ctx, d.ns, metav1.GetOptions{})
		got.Namespace = err == nil
		if !got.Namespace && !apierrors.IsNotFound(err) {
			return got, err
		}
		if (maps.Equal(got.Objects, want.Objects) && got.Namespace == want.Namespace) || time.Now().After(deadline) {
			return got, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func gcCheck(t *testing.T, s gcSequence, got gcState) bool {
	t.Helper()
	want := gcExpect(s)
	if maps.Equal(got.Objects, want.Objects) && got.Namespace == want.Namespace {
		return true
	}
	t.Errorf("%s\n  want %+v\n  got  %+v", s, want, got)
	return false
}

// TestGarbageCollectionDifferentialFake runs hundreds of generated
// sequences on the fake store's garbage collector and namespace deletion.
func TestGarbageCollectionDifferentialFake(t *testing.T) {
	n := 1000
	if !testing.Short() {
		n = 5000
	}
	failed := 0
	for seed := range uint64(n) {
		s := gcGenerate(seed)
		var got gcState
		synctest.Test(t, func(t *testing.T) {
			b, err := fake.New(fake.Config{})
			require.NoError(t, err)
			env, err := b.Start(context.Background())
			require.NoError(t, err)
			defer func() { require.NoError(t, b.Stop()) }()
			got = runGC(t, env, s)
		})
		if !gcCheck(t, s, got) {
			failed++
		}
	}
	t.Logf("fake store: %d generated garbage collection sequences, %d differ from the model", n, failed)
}

// TestGarbageCollectionDifferentialEnvtest runs a seeded sample of the
// same sequences on kube-controller-manager's garbage collector and
// namespace controller: the model, and so the fake store, is checked
// against them.
func TestGarbageCollectionDifferentialEnvtest(t *testing.T) {
	cp := simtest.Require(t)
	n := 3
	if !testing.Short() {
		n = 24
	}
	t.Run("sample", func(t *testing.T) {
		for i := range n {
			seed := uint64(2000 + i*41)
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				b, err := envtest.NewBackend(cp, "gc-differential-")
				require.NoError(t, err)
				env, err := b.Start(context.Background())
				require.NoError(t, err)
				defer func() { require.NoError(t, b.Stop()) }()
				gcCheck(t, gcGenerate(seed), runGC(t, env, gcGenerate(seed)))
			})
		}
	})
	t.Logf("envtest: %d generated garbage collection sequences", n)
}

func runGC(t *testing.T, env *sim.Env, s gcSequence) gcState {
	t.Helper()
	ctx := context.Background()
	d := &gcDriver{c: env.Observer, ns: env.Namespace + "-g"}
	defer func() {
		_ = d.c.CoreV1().Namespaces().Delete(ctx, d.ns, metav1.DeleteOptions{})
	}()
	require.NoError(t, d.run(ctx, s), s.String())
	got, err := d.settle(ctx, gcExpect(s))
	require.NoError(t, err)
	return got
}
