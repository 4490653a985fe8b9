package webapp_test

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

// What must hold over a run's whole history, whatever the timing: checks
// of the recorded versions, after the run. Each returns every violation.

// sorted returns the versions in resourceVersion order.
func (h *history) sorted() []version {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.versions)
	slices.SortStableFunc(out, func(a, b version) int { return cmp.Compare(a.rv, b.rv) })
	return out
}

// has says whether the history holds an event of typ for kind/name.
func (h *history) has(kind, name string, typ watch.EventType) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.versions, func(v version) bool {
		return v.kind == kind && v.obj.GetName() == name && v.typ == typ
	})
}

// observedGenerationNeverDecreases: a WebApp's status never goes back to
// an older generation.
func observedGenerationNeverDecreases(h *history) error {
	var errs []error
	last := map[string]int64{}
	for _, v := range h.sorted() {
		app, ok := v.obj.(*v1alpha1.WebApp)
		if !ok {
			continue
		}
		if g := app.Status.ObservedGeneration; g < last[app.Name] {
			errs = append(errs, fmt.Errorf("WebApp %s at resourceVersion %d: status.observedGeneration went from %d back to %d", app.Name, v.rv, last[app.Name], g))
		}
		last[app.Name] = max(last[app.Name], app.Status.ObservedGeneration)
	}
	return errors.Join(errs...)
}

// availableOnlyWhenSeen: whenever a WebApp's status says Available for
// its current generation, its Deployment was, at some point before that
// write, running that generation's replicas and config, caught up with its
// own spec and with the replicas ready. A status describes what was
// observed, never what is only about to be. (Not "at that very moment": a
// status is read from a cache, and on a real cluster readiness can dip
// between the read and the write.)
func availableOnlyWhenSeen(h *history) error {
	var errs []error
	seen := map[string][]*appsv1.Deployment{} // the versions of each Deployment since it was created
	for _, v := range h.sorted() {
		switch o := v.obj.(type) {
		case *appsv1.Deployment:
			seen[o.Name] = append(seen[o.Name], o)
			if v.typ == watch.Deleted {
				seen[o.Name] = nil
			}
		case *v1alpha1.WebApp:
			if v.typ == watch.Deleted || o.Status.ObservedGeneration != o.Generation || !conditionTrue(o, v1alpha1.Available) {
				continue
			}
			versions := seen[o.Name]
			if slices.ContainsFunc(versions, func(d *appsv1.Deployment) bool { return notRolledOut(o, d) == "" }) {
				continue
			}
			why := "it has no Deployment"
			if len(versions) > 0 {
				why = "no earlier version of its Deployment ran it with the replicas ready (the last " + notRolledOut(o, versions[len(versions)-1]) + ")"
			}
			errs = append(errs, fmt.Errorf("WebApp %s at resourceVersion %d says Available for generation %d, but %s", o.Name, v.rv, o.Generation, why))
		}
	}
	return errors.Join(errs...)
}

// notRolledOut says how d falls short of running app's spec with its
// replicas ready, or nothing when it does not.
func notRolledOut(app *v1alpha1.WebApp, d *appsv1.Deployment) string {
	want := ptr.Deref(app.Spec.Replicas, 1)
	hash := webapp.ConfigHash(app.Spec.Config)
	switch {
	case ptr.Deref(d.Spec.Replicas, 1) != want:
		return fmt.Sprintf("asked for %d replicas, not %d", ptr.Deref(d.Spec.Replicas, 1), want)
	case d.Spec.Template.Annotations[webapp.ConfigHashAnnotation] != hash:
		return fmt.Sprintf("ran config %s, not %s", d.Spec.Template.Annotations[webapp.ConfigHashAnnotation], hash)
	case d.Status.ObservedGeneration < d.Generation:
		return fmt.Sprintf("had observed generation %d of %d", d.Status.ObservedGeneration, d.Generation)
	case d.Status.ReadyReplicas < want:
		return fmt.Sprintf("had %d of %d replicas ready", d.Status.ReadyReplicas, want)
	}
	return ""
}

// childrenGoneBeforeOwner: a WebApp disappears only after the children it
// controlled are gone, which is what its finalizer is for.
func childrenGoneBeforeOwner(h *history) error {
	var errs []error
	alive := map[string]version{} // kind/name -> latest version of a child still there
	for _, v := range h.sorted() {
		key := v.kind + "/" + v.obj.GetName()
		if v.typ == watch.Deleted {
			delete(alive, key)
		} else if v.kind != "WebApp" {
			alive[key] = v
		}
		if v.kind != "WebApp" || v.typ != watch.Deleted {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(alive)) {
			if c := alive[k]; metav1.IsControlledBy(c.obj, v.obj) {
				errs = append(errs, fmt.Errorf("WebApp %s was gone at resourceVersion %d while its %s %s still existed", v.obj.GetName(), v.rv, c.kind, c.obj.GetName()))
			}
		}
	}
	return errors.Join(errs...)
}
