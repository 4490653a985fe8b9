package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/scenarios/expect"
)

// every calls act(n) every period from the start of the run until until
// (from the start), count times (zero: no bound) or the end of ctx, in its
// own goroutine.
func (r *run) every(ctx context.Context, period, until Duration, count int, act func(n int)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		end := r.start.Add(time.Duration(until))
		tick := time.NewTicker(time.Duration(period))
		defer tick.Stop()
		for n := 0; count == 0 || n < count; n++ {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if now.After(end) {
					return
				}
			}
			r.checkLimit()
			act(n)
		}
	}()
}

// interfere runs the i-th interfering actor: it acts on the objects its
// selector matches, in turn by name, through the harness's unfaulted
// client, as another team's tooling or a node drain would.
func (r *run) interfere(ctx context.Context, i int, in Interference) {
	who := fmt.Sprintf("interference %d", i)
	r.every(ctx, in.Every, in.Until, in.Count, func(n int) {
		objs := r.hist.selected(in.Select)
		if len(objs) == 0 {
			return
		}
		target := objs[n%len(objs)]
		client, _, err := r.kube.resource(target.GroupVersionKind())
		if err != nil {
			return
		}
		name := target.GetName()
		if in.Delete {
			err := client.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			switch {
			case err == nil:
				r.hist.log(time.Now(), fmt.Sprintf("%s deleted %s %s", who, target.GetKind(), name))
			case !apierrors.IsNotFound(err) && ctx.Err() == nil:
				r.fail(fmt.Errorf("%s could not delete %s %s: the API server answered: %w", who, target.GetKind(), name, err))
			}
			return
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
				return
			}
			_, err = client.Patch(ctx, name, pt, data, metav1.PatchOptions{}, sub...)
			r.acted(ctx, err, who, what, target.GetKind(), name)
			return
		}
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return
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
			return
		}
		_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
		r.acted(ctx, err, who, what, target.GetKind(), name)
	})
}

// acted logs an interfering write, or skips one that met a conflict or
// found the object gone; any other refusal ends the run as the harness's
// error.
func (r *run) acted(ctx context.Context, err error, who, what, kind, name string) {
	switch {
	case err == nil:
		r.hist.log(time.Now(), fmt.Sprintf("%s: %s of %s %s", who, what, kind, name))
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.hist.log(time.Now(), fmt.Sprintf("%s skipped: %s of %s %s: %v", who, what, kind, name, err))
	case ctx.Err() == nil:
		r.fail(fmt.Errorf("%s could not %s of %s %s: the API server answered: %w", who, what, kind, name, err))
	}
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
