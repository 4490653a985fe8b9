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

// tick is what an interfering actor's call came to.
type tick int

const (
	// counted: the call acted (or had nothing to act on) and counts.
	counted tick = iota
	// again: the call did not count; the next tick tries again.
	again
	// unreached: the write did not reach a server that was down or
	// overloaded (a control-plane fault of the run); it is tried again
	// after unreachedRetry, before the next tick if that is sooner.
	unreached
)

// unreachedRetry is how soon an interfering write that did not reach the
// server is tried again: an API server being restarted is back within
// seconds, and the scenario's interference is meant to happen, not to be
// lost to the restart.
const unreachedRetry = time.Second

// every calls act(n) every period from after (from the start of the
// run) until until (from the start), until count of its calls have counted
// (zero: no bound) or the end of ctx, in its own goroutine. n counts the
// calls that counted before. The calls keep to the grid start + after +
// k*period, however long the run's setup took (that varies with goroutine
// order); a tick already past when the actor is ready is skipped, as a
// Ticker drops what it cannot deliver. A call whose write did not reach the
// server is made again after unreachedRetry; if the actor still owes calls
// (count) when until comes and its last one did not reach the server, the
// run ends as the harness's error (what): the scenario's world did not
// happen, so there is nothing to judge.
func (r *run) every(ctx context.Context, period, after, until Duration, count int, what string, act func(n int) tick) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		end := r.start.Add(time.Duration(until))
		p := time.Duration(period)
		next := r.start.Add(time.Duration(after) + p)
		wait := time.NewTimer(0)
		wait.Stop() // armed at each tick below
		defer wait.Stop()
		var retry time.Time // a call that did not reach the server, again at retry
		for n := 0; count == 0 || n < count; {
			if late := time.Since(next); late > 0 {
				next = next.Add((late + p - 1) / p * p)
			}
			at := next
			if !retry.IsZero() && retry.Before(next) {
				at = retry
			}
			if at.After(end) {
				if !retry.IsZero() && count > 0 && ctx.Err() == nil {
					r.fail(fmt.Errorf("%s acted %d of the %d times it must by %v: its writes did not reach the API server (a control-plane fault of the run), so the run is not the scenario's world",
						what, n, count, time.Duration(until)))
				}
				return
			}
			wait.Reset(time.Until(at))
			select {
			case <-ctx.Done():
				return
			case <-wait.C:
			}
			if !at.Before(next) {
				next = next.Add(p)
			}
			r.checkLimit()
			retry = time.Time{}
			switch act(n) {
			case counted:
				n++
			case unreached:
				retry = time.Now().Add(unreachedRetry)
			}
		}
	}()
}

// interfere runs the i-th interfering actor: it acts on the objects its
// selector matches, in turn by name, through the harness's unfaulted
// client, as another team's tooling or a node drain would.
func (r *run) interfere(ctx context.Context, i int, in Interference) {
	who := fmt.Sprintf("interference %d", i)
	r.every(ctx, in.Every, in.After, in.Until, in.Count, who, func(n int) tick {
		if in.Create != nil {
			return r.interfereCreate(ctx, who, in.Create, n)
		}
		objs := r.hist.selected(in.Select)
		if len(objs) == 0 {
			return counted
		}
		target := objs[n%len(objs)]
		client, _, err := r.kube.resource(target.GroupVersionKind())
		if err != nil {
			if transient(err) {
				return r.unreached(who, "find the resource of "+target.GetKind(), err)
			}
			return counted
		}
		name := target.GetName()
		if in.Delete {
			err := client.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			switch {
			case err == nil:
				r.hist.log(time.Now(), fmt.Sprintf("%s deleted %s %s", who, target.GetKind(), name))
			case transient(err) && ctx.Err() == nil:
				return r.unreached(who, fmt.Sprintf("delete %s %s", target.GetKind(), name), err)
			case !apierrors.IsNotFound(err) && ctx.Err() == nil:
				r.fail(fmt.Errorf("%s could not delete %s %s: the API server answered: %w", who, target.GetKind(), name, err))
			}
			return counted
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
				return counted
			}
			_, err = client.Patch(ctx, name, pt, data, metav1.PatchOptions{}, sub...)
			return r.acted(ctx, err, in.Refused, who, what, target.GetKind(), name)
		}
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if transient(err) && ctx.Err() == nil {
				return r.unreached(who, fmt.Sprintf("read %s %s", target.GetKind(), name), err)
			}
			return counted
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
			return counted
		}
		_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
		return r.acted(ctx, err, in.Refused, who, what, target.GetKind(), name)
	})
}

// unreached logs an interfering write (what) that did not reach the
// server, to be tried again.
func (r *run) unreached(who, what string, err error) tick {
	r.hist.log(time.Now(), fmt.Sprintf("%s: could not %s, the API server did not answer; tried again in %v: %v", who, what, unreachedRetry, err))
	return unreached
}

// interfereCreate is an interfering actor's create of its n-th object. A
// name taken is tried again at the next tick, so "count: 1" is one object
// made, whenever its name came free.
func (r *run) interfereCreate(ctx context.Context, who string, m Object, n int) tick {
	u := &unstructured.Unstructured{Object: withN(withNow(map[string]any(m), time.Now()), n).(map[string]any)}
	client, mapping, err := r.kube.resource(u.GroupVersionKind())
	switch {
	case err != nil && transient(err):
		return r.unreached(who, fmt.Sprintf("find the resource of %s", u.GetKind()), err)
	case err != nil:
		r.fail(fmt.Errorf("%s could not create %s %s: %w", who, u.GetKind(), u.GetName(), err))
		return counted
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		u.SetNamespace(r.kube.ns)
	}
	_, err = client.Create(ctx, u, metav1.CreateOptions{})
	switch {
	case err == nil:
		r.hist.log(time.Now(), fmt.Sprintf("%s created %s %s", who, u.GetKind(), u.GetName()))
	case apierrors.IsAlreadyExists(err):
		return again // quietly: it is tried at every tick
	case transient(err) && ctx.Err() == nil:
		return r.unreached(who, fmt.Sprintf("create %s %s", u.GetKind(), u.GetName()), err)
	case ctx.Err() == nil:
		r.fail(fmt.Errorf("%s could not create %s %s: the API server answered: %w", who, u.GetKind(), u.GetName(), err))
	}
	return counted
}

// acted logs an interfering write, or skips one that met a conflict or
// found the object gone; one that did not reach a server that was down or
// overloaded (a control-plane fault of the run) is tried again
// (unreached); any other refusal ends the run as the harness's error. A
// write meant to be refused (refused) is logged when the server refuses it
// as invalid (422, or 400 for a value of the wrong type), and ends the run
// as the harness's error when the server takes it.
func (r *run) acted(ctx context.Context, err error, refused bool, who, what, kind, name string) tick {
	switch {
	case refused && err == nil:
		r.fail(fmt.Errorf("%s: the API server took the %s of %s %s, a write it must refuse", who, what, kind, name))
	case refused && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)):
		r.hist.log(time.Now(), fmt.Sprintf("%s: %s of %s %s refused, as it must be: %v", who, what, kind, name, err))
	case err == nil:
		r.hist.log(time.Now(), fmt.Sprintf("%s: %s of %s %s", who, what, kind, name))
	case transient(err) && ctx.Err() == nil:
		return r.unreached(who, fmt.Sprintf("%s of %s %s", what, kind, name), err)
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.hist.log(time.Now(), fmt.Sprintf("%s skipped: %s of %s %s: %v", who, what, kind, name, err))
	case ctx.Err() == nil:
		r.fail(fmt.Errorf("%s could not %s of %s %s: the API server answered: %w", who, what, kind, name, err))
	}
	return counted
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
