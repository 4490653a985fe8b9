package scenarios

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
			if err := client.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err == nil {
				r.hist.log(time.Now(), fmt.Sprintf("%s deleted %s %s", who, target.GetKind(), name))
			}
			return
		}
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return
		}
		value := strings.ReplaceAll(in.Set.Value, "{{n}}", strconv.Itoa(n))
		if err := setString(cur.Object, in.Set.Path, value); err != nil {
			r.hist.log(time.Now(), fmt.Sprintf("%s cannot set %s of %s: %v", who, in.Set.Path, name, err))
			return
		}
		if _, err := client.Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
			r.hist.log(time.Now(), fmt.Sprintf("%s set %s of %s %s", who, in.Set.Path, target.GetKind(), name))
		}
	})
}

// setString sets the string at path in obj, making the maps on the way; a
// list index must exist.
func setString(obj map[string]any, path, value string) error {
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
