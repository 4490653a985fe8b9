package fake

import (
	"context"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// DropErrorBackoff replaces apimachinery's process-wide error handlers with
// one that only logs, through the context's logger. Call it once, from
// TestMain, in a test binary that runs client-go in synctest bubbles.
//
// Why: utilruntime.HandleError (reflectors call it when a LIST fails)
// rate-limits callers by sleeping for 1ms minus the time since the previous
// error. Its first "previous error" is the real time at process start; inside
// a bubble time starts in 2000, so that difference is negative and the first
// error sleeps for decades of virtual time while other goroutines tick.
func DropErrorBackoff() {
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{
		func(ctx context.Context, err error, msg string, keysAndValues ...any) {
			klog.FromContext(ctx).Error(err, msg, keysAndValues...)
		},
	}
}
