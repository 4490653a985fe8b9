package zoo

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim"
)

// Mutant is a controller with one classic bug.
type Mutant struct {
	// Name is short, for tables: "no-cache-sync".
	Name string
	// Bug says what the developer wrote, in a sentence.
	Bug string
	p   func() pieces
	c   scenarios.Controller
}

// Controller is the mutant as a controller under test.
func (m Mutant) Controller() scenarios.Controller {
	if m.c != nil {
		return m.c
	}
	return kitController{name: m.Name, p: m.p}
}

// Of is a mutant of a controller other than the kit: an example's
// controller built with one of its bugs (or none, for its control row).
func Of(name, bug string, c scenarios.Controller) Mutant { return Mutant{Name: name, Bug: bug, c: c} }

// Control is the kit with no bug: the zoo's control row. A scenario the
// control fails cannot catch anything.
func Control() Mutant {
	return Mutant{Name: "control", Bug: "none: the hand-written controller as it should be", p: correct}
}

type kitController struct {
	name string
	p    func() pieces
}

func (c kitController) Name() string { return c.name }

// Judge is the scaler's: a mutant is judged as the scaler it imitates.
func (kitController) Judge() scenarios.Judge { return scaler.NewJudge() }

// Identity is the scaler's RBAC and update on Deployments, which the kit's
// author grants because one of its writes (blind-write's) is an update: a
// mutant is caught by what its bug does, not refused before it can act.
func (kitController) Identity() sim.Identity {
	id := scaler.Controller{}.Identity()
	for _, obj := range id.RBAC {
		if role, ok := obj.(*rbacv1.Role); ok {
			role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"update"}})
		}
	}
	return id
}

func (c kitController) New(in scenarios.Instance) (scenarios.Runner, error) {
	return newKit(in, c.p())
}

// Mutants is the zoo, in the order of the table.
func Mutants() []Mutant {
	return []Mutant{
		{Name: "no-cache-sync", Bug: "workers start before the informers' caches have synced", p: func() pieces {
			p := correct()
			p.run = runWithoutSync
			return p
		}},
		{Name: "done-skipped", Bug: "Done is not called when a write fails, so the key is stuck for good", p: func() pieces {
			p := correct()
			p.next = nextForgetsDoneOnError
			return p
		}},
		{Name: "blind-write", Bug: "writes the whole cached object back with Update and no resourceVersion (lost update)", p: func() pieces {
			p := correct()
			p.write = blindUpdate
			return p
		}},
		{Name: "hot-loop", Bug: "UpdateFunc enqueues every update and reconcile stamps an annotation on every pass", p: func() pieces {
			p := correct()
			p.reconcile = reconcileAndStamp
			return p
		}},
		{Name: "tombstone-panic", Bug: "DeleteFunc type-asserts *corev1.Pod and panics on a tombstone", p: func() pieces {
			p := correct()
			p.handlers = handlersAssertingPods
			return p
		}},
		{Name: "retry-no-backoff", Bug: "a failed key goes straight back into the queue: no backoff, no cap", p: func() pieces {
			p := correct()
			p.next = nextRetriesAtOnce
			return p
		}},
		{Name: "gives-up", Bug: "drops a key after 5 retries, as client-go's workqueue example does: a Deployment whose writes fail for 155 ms is never scaled again", p: func() pieces {
			p := correct()
			p.next = nextGivesUp
			return p
		}},
		{Name: "drops-on-conflict", Bug: "a pass that meets a 409 is over and its key forgotten: nothing scales the Deployment until the next event about it or its pods", p: func() pieces {
			p := correct()
			p.next = nextDropsOnConflict
			return p
		}},
		{Name: "no-cooldown", Bug: "doubles again as soon as pods are not ready, without waiting for new pods", p: func() pieces {
			p := correct()
			p.settled = actAtOnce
			return p
		}},
		{Name: "deployments-only", Bug: "watches Deployments only, and only their spec changes, so pods turning unready are never noticed", p: func() pieces {
			p := correct()
			p.handlers = deploymentHandlersOnly
			return p
		}},
		{Name: "split-write", Bug: "writes replicas and its cooldown stamp in two requests; killed between them, its successor forgets the cooldown", p: func() pieces {
			p := correct()
			p.write = writeInTwoSteps
			return p
		}},
		{Name: "list-per-reconcile", Bug: "LISTs pods from the API server on every reconcile", p: func() pieces {
			p := correct()
			p.ready = readyFromServer
			return p
		}},
		{Name: "cache-mutation", Bug: "scales the Deployment the lister returned, in place, and updates it: the informer's cache holds replicas the server never accepted when the update fails", p: func() pieces {
			p := correct()
			p.write = updateCached
			return p
		}},
		{Name: "no-precondition", Bug: "scales with a merge patch that carries no resourceVersion: a successor started against a lagging view writes again what its predecessor had already written", p: func() pieces {
			p := correct()
			p.write = patchWithoutPrecondition
			return p
		}},
		{Name: "no-release", Bug: "leader election without ReleaseOnCancel: a successor waits out the Lease", p: func() pieces {
			p := correct()
			p.releaseOnCancel = false
			return p
		}},
	}
}

// runWithoutSync starts the workers right after the informers: the first
// reconciles read caches that may still be empty.
func runWithoutSync(k *kit, ctx context.Context) error {
	defer k.queue.ShutDown()
	k.factory.Start(ctx.Done())
	defer k.factory.Shutdown()
	done := make(chan struct{})
	for range workers {
		go func() {
			for k.p.next(k, ctx) {
			}
			done <- struct{}{}
		}()
	}
	<-ctx.Done()
	k.queue.ShutDownWithDrain()
	for range workers {
		<-done
	}
	return nil
}

func nextForgetsDoneOnError(k *kit, ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	k.reconciles.Add(1)
	if err := k.p.reconcile(k, ctx, key); err != nil {
		k.retries.Add(1)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	k.queue.Done(key)
	return true
}

func blindUpdate(k *kit, ctx context.Context, d *appsv1.Deployment, target int32) error {
	cp := d.DeepCopy()
	cp.ResourceVersion = ""
	cp.Spec.Replicas = &target
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[controller.AnnotationLastScale] = time.Now().UTC().Format(time.RFC3339Nano)
	_, err := k.client.AppsV1().Deployments(d.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	if err == nil {
		k.based.Store(d.Namespace+"/"+d.Name, d.ResourceVersion)
	}
	return err
}

// patchWithoutPrecondition is patchReplicas without the resourceVersion
// it read: the server takes the decision whatever the Deployment became.
func patchWithoutPrecondition(k *kit, ctx context.Context, d *appsv1.Deployment, target int32) error {
	_, err := k.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, scalePatch("", target), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		k.based.Store(d.Namespace+"/"+d.Name, d.ResourceVersion)
	}
	return err
}

// updateCached is patchReplicas written on the cached object: no copy.
func updateCached(k *kit, ctx context.Context, d *appsv1.Deployment, target int32) error {
	d.Spec.Replicas = &target
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[controller.AnnotationLastScale] = time.Now().UTC().Format(time.RFC3339Nano)
	rv := d.ResourceVersion
	_, err := k.client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		k.based.Store(d.Namespace+"/"+d.Name, rv)
	}
	return err
}

// reconcileAndStamp records when it last looked at each Deployment, in an
// annotation, on every pass; the write is an update event, which enqueues
// the key again.
func reconcileAndStamp(k *kit, ctx context.Context, key string) error {
	if err := reconcile(k, ctx, key); err != nil {
		return err
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	patch := []byte(`{"metadata":{"annotations":{"converge.dev/last-seen":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}}}`)
	_, err := k.client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func handlersAssertingPods(k *kit) error {
	if err := handlers(k); err != nil {
		return err
	}
	_, err := k.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			pod := obj.(*corev1.Pod)
			k.enqueueOwner(pod)
		},
	})
	return err
}

func nextRetriesAtOnce(k *kit, ctx context.Context) bool {
	key, release, ok := k.take()
	if !ok {
		return false
	}
	defer release()
	if err := k.p.reconcile(k, ctx, key); err != nil {
		k.retries.Add(1)
		k.queue.Add(key)
	}
	return true
}

// nextGivesUp retries a failing key five times, then forgets it: the
// rate limiter's backoff is then spent in 155 ms.
func nextGivesUp(k *kit, ctx context.Context) bool {
	key, release, ok := k.take()
	if !ok {
		return false
	}
	defer release()
	if err := k.p.reconcile(k, ctx, key); err != nil && k.queue.NumRequeues(key) < 5 {
		k.retries.Add(1)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// nextDropsOnConflict retries a failing key with backoff, except after a
// conflict: the object changed, the developer thought, so an event will
// bring the key back.
func nextDropsOnConflict(k *kit, ctx context.Context) bool {
	key, release, ok := k.take()
	if !ok {
		return false
	}
	defer release()
	err := k.p.reconcile(k, ctx, key)
	switch {
	case err == nil, apierrors.IsConflict(err):
		k.queue.Forget(key)
	default:
		k.retries.Add(1)
		k.queue.AddRateLimited(key)
	}
	return true
}

// actAtOnce scales whenever the policy asks: pods still starting count as
// unready, so it doubles again before they could be ready.
func actAtOnce(*kit, string, *appsv1.Deployment) bool { return true }

// deploymentHandlersOnly reacts to Deployments being added or their spec
// changing (status updates are noise, the developer thought), and reads the
// pods only when it reconciles.
func deploymentHandlersOnly(k *kit) error {
	_, err := k.factory.Apps().V1().Deployments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				k.queue.Add(key)
			}
		},
		UpdateFunc: func(old, cur any) {
			if old.(*appsv1.Deployment).Generation == cur.(*appsv1.Deployment).Generation {
				return
			}
			if key, err := cache.MetaNamespaceKeyFunc(cur); err == nil {
				k.queue.Add(key)
			}
		},
	})
	// The pod lister is still read; its informer is started through it.
	k.factory.Core().V1().Pods().Informer()
	return err
}

// writeInTwoSteps scales first and stamps the cooldown after: a process
// killed between the two leaves replicas raised and no stamp.
func writeInTwoSteps(k *kit, ctx context.Context, d *appsv1.Deployment, target int32) error {
	scale := []byte(fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"replicas":%d}}`, d.ResourceVersion, target))
	_, err := k.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, scale, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	k.based.Store(d.Namespace+"/"+d.Name, d.ResourceVersion)
	stamp := []byte(`{"metadata":{"annotations":{"` + controller.AnnotationLastScale + `":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}}}`)
	_, err = k.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, stamp, metav1.PatchOptions{})
	return err
}

func readyFromServer(k *kit, ctx context.Context, d *appsv1.Deployment) (int32, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return 0, err
	}
	list, err := k.client.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return 0, err
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return countReady(pods), nil
}
