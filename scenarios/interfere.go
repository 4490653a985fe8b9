package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/scenarios/expect"
)

// every calls act(n) every period from after (from the start of the
// run) until until (from the start), until count of its calls have counted
// (zero: no bound; act says whether its call counts) or the end of ctx, in
// its own goroutine. n counts the calls that counted before. The calls
// keep to the grid start + after + k*period, however long the run's setup
// took (that varies with goroutine order); a tick already past when the
// actor is ready is skipped, as a Ticker drops what it cannot deliver.
func (r *run) every(ctx context.Context, period, after, until Duration, count int, act func(n int) bool) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		end := r.start.Add(time.Duration(until))
		p := time.Duration(period)
		next := r.start.Add(time.Duration(after) + p)
		wait := time.NewTimer(0)
		wait.Stop() // armed at each tick below
		defer wait.Stop()
		for n := 0; count == 0 || n < count; next = next.Add(p) {
			if late := time.Since(next); late > 0 {
				next = next.Add((late + p - 1) / p * p)
			}
			if next.After(end) {
				return
			}
			wait.Reset(time.Until(next))
			select {
			case <-ctx.Done():
				return
			case <-wait.C:
			}
			r.checkLimit()
			if act(n) {
				n++
			}
		}
	}()
}

// interfere runs the i-th interfering actor: it acts on the objects its
// selector matches, in turn by name, through the harness's unfaulted
// client, as another team's tooling or a node drain would.
func (r *run) interfere(ctx context.Context, i int, in Interference) {
	who := fmt.Sprintf("interference %d", i)
	r.every(ctx, in.Every, in.After, in.Until, in.Count, func(n int) bool {
		if in.Create != nil {
			return r.interfereCreate(ctx, who, in.Create, n)
		}
		objs := r.hist.selected(in.Select)
		if len(objs) == 0 {
			return true
		}
		target := objs[n%len(objs)]
		client, _, err := r.kube.resource(target.GroupVersionKind())
		if err != nil {
			return true
		}
		name := target.GetName()
		if in.Delete {
			err := client.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			switch {
			case err == nil:
				r.hist.log(time.Now(), fmt.Sprintf("%s deleted %s %s", who, target.GetKind(), name))
			case !apierrors.IsNotFound(err) && !transient(err) && ctx.Err() == nil:
				r.fail(fmt.Errorf("%s could not delete %s %s: the API server answered: %w", who, target.GetKind(), name, err))
			}
			return true
		}
		if p := in.Patch; p != nil {
			pt, what := types.MergePatchType, "merge patch"
			if p.Type == JSONPatch {
				pt, what = types.JSONPatchType, "json patch"
			}
			var sub []string
			if p.Subresource != "" {
				sub = []string{p.Subresource}
				what += " of " + p.Subresource
			}
			data, err := json.Marshal(withN(withNow(p.Patch, time.Now()), n))
			if err != nil {
				r.fail(fmt.Errorf("%s: its patch: %w", who, err))
				return true
			}
			_, err = client.Patch(ctx, name, pt, data, metav1.PatchOptions{}, sub...)
			r.acted(ctx, err, in.Refused, who, what, target.GetKind(), name)
			return true
		}
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return true
		}
		value := withNow(in.Set.Value, time.Now())
		if s, ok := value.(string); ok {
			value = strings.ReplaceAll(s, "{{n}}", strconv.Itoa(n))
		}
		what := "set " + in.Set.Path
		if in.Set.Remove {
			what = "remove " + in.Set.Path
		}
		if err := setField(cur.Object, in.Set.Path, value, in.Set.Remove); err != nil {
			r.fail(fmt.Errorf("%s could not %s of %s %s: %w", who, what, target.GetKind(), name, err))
			return true
		}
		_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
		r.acted(ctx, err, in.Refused, who, what, target.GetKind(), name)
		return true
	})
}

// interfereCreate is an interfering actor's create of its n-th object. It
// reports whether it created one: a name taken is tried again at the next
// tick, so "count: 1" is one object made, whenever its name came free.
func (r *run) interfereCreate(ctx context.Context, who string, m Object, n int) bool {
	u := &unstructured.Unstructured{Object: withN(withNow(map[string]any(m), time.Now()), n).(map[string]any)}
	client, mapping, err := r.kube.resource(u.GroupVersionKind())
	if err != nil {
		r.fail(fmt.Errorf("%s could not create %s %s: %w", who, u.GetKind(), u.GetName(), err))
		return true
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		u.SetNamespace(r.kube.ns)
	}
	_, err = client.Create(ctx, u, metav1.CreateOptions{})
	switch {
	case err == nil:
		r.hist.log(time.Now(), fmt.Sprintf("%s created %s %s", who, u.GetKind(), u.GetName()))
	case apierrors.IsAlreadyExists(err):
		return false // quietly: it is tried at every tick
	case transient(err):
		r.hist.log(time.Now(), fmt.Sprintf("%s: create of %s %s failed, tried again at the next tick: %v", who, u.GetKind(), u.GetName(), err))
		return false
	case ctx.Err() == nil:
		r.fail(fmt.Errorf("%s could not create %s %s: the API server answered: %w", who, u.GetKind(), u.GetName(), err))
	}
	return true
}

// acted logs an interfering write, or skips one that met a conflict,
// found the object gone or did not reach a server that was down or
// overloaded (a control-plane fault of the run); any other refusal ends
// the run as the harness's error. A write meant to be refused (refused)
// is logged when the server refuses it as invalid (422, or 400 for a value
// of the wrong type), and ends the run as the harness's error when the
// server takes it.
func (r *run) acted(ctx context.Context, err error, refused bool, who, what, kind, name string) {
	switch {
	case refused && err == nil:
		r.fail(fmt.Errorf("%s: the API server took the %s of %s %s, a write it must refuse", who, what, kind, name))
	case refused && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)):
		r.hist.log(time.Now(), fmt.Sprintf("%s: %s of %s %s refused, as it must be: %v", who, what, kind, name, err))
	case err == nil:
		r.hist.log(time.Now(), fmt.Sprintf("%s: %s of %s %s", who, what, kind, name))
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || transient(err):
		r.hist.log(time.Now(), fmt.Sprintf("%s skipped: %s of %s %s: %v", who, what, kind, name, err))
	case ctx.Err() == nil:
		r.fail(fmt.Errorf("%s could not %s of %s %s: the API server answered: %w", who, what, kind, name, err))
	}
}

// transient: err says the server could not be reached or could not
// answer now, not that it refused the write.
func transient(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err)
}

// withN copies v with "{{n}}" in its strings replaced by n.
func withN(v any, n int) any {
	return mapStrings(v, func(s string) string { return strings.ReplaceAll(s, "{{n}}", strconv.Itoa(n)) }, false)
}

// setField sets value at path in obj, making the maps on the way, or
// removes what is there; a list index must exist.
func setField(obj map[string]any, path string, value any, remove bool) error {
	p, err := expect.ParsePath(path)
	if err != nil {
		return err
	}
	var cur any = obj
	for i, seg := range p {
		last := i == len(p)-1
		switch c := cur.(type) {
		case map[string]any:
			if seg.Index >= 0 {
				return fmt.Errorf("%s: a map, not a list", expect.Path(p[:i+1]))
			}
			if last && remove {
				delete(c, seg.Key)
				return nil
			}
			if last {
				c[seg.Key] = value
				return nil
			}
			next, ok := c[seg.Key]
			if !ok || next == nil {
				next = map[string]any{}
				c[seg.Key] = next
			}
			cur = next
		case []any:
			if seg.Index < 0 || seg.Index >= len(c) {
				return fmt.Errorf("%s: no such element", expect.Path(p[:i+1]))
			}
			if last && remove {
				return fmt.Errorf("%s: an element of a list is not removed, it is replaced", expect.Path(p[:i+1]))
			}
			if last {
				c[seg.Index] = value
				return nil
			}
			cur = c[seg.Index]
		default:
			return fmt.Errorf("%s: not a map or a list", expect.Path(p[:i+1]))
		}
	}
	return nil
}
