package webapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

const (
	// Finalizer holds a WebApp until the operator has deleted its
	// children.
	Finalizer = "examples.converge.dev/cleanup"
	// ControllerName names the controller in logs and metrics, and is the
	// reporting controller of its Events.
	ControllerName = "webapp-operator"

	// reconciledAtAnnotation is what the requeue-storm mutant stamps.
	reconciledAtAnnotation = "examples.converge.dev/reconciled-at"
)

// NewScheme returns a scheme of the built-in kinds and WebApps, the one a
// manager running the operator needs.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), v1alpha1.AddToScheme(s)); err != nil {
		return nil, fmt.Errorf("webapp: scheme: %w", err)
	}
	return s, nil
}

// Setup adds the operator to mgr, whose scheme must know WebApps (see
// NewScheme).
func Setup(mgr ctrl.Manager, opts Options) error {
	return (&Reconciler{Options: opts}).SetupWithManager(mgr)
}

// Reconciler reconciles WebApps. Fields left nil are taken from the
// manager by SetupWithManager.
type Reconciler struct {
	Client client.Client
	// Reader reads past the cache: the finalizer decides from it that
	// the children are gone, which a cache that has not seen them yet
	// would wrongly say. Nil means the manager's API reader.
	Reader   client.Reader
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	Options  Options
}

// SetupWithManager registers the reconciler with mgr: it watches WebApps
// and the Deployments, Services and ConfigMaps they control.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.Options.Validate(); err != nil {
		return err
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder(ControllerName)
	}
	if _, err := apiutil.GVKForObject(&v1alpha1.WebApp{}, r.Scheme); err != nil {
		return fmt.Errorf("webapp: the scheme does not know WebApps (see NewScheme): %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&v1alpha1.WebApp{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Complete(r)
}

// Reconcile brings one WebApp's children and status to its spec, or cleans
// up after it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	result, err := r.reconcile(ctx, req)
	if r.Options.Bug == IgnoreConflict && apierrors.IsConflict(err) {
		// Bug: "someone else wrote it, so their event will bring us
		// back". No event comes when that write changed nothing we watch,
		// or never happened.
		logf.FromContext(ctx).Info("Conflict, leaving it to the next event", "err", err)
		return ctrl.Result{}, nil
	}
	return result, err
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &v1alpha1.WebApp{}
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		// Gone: the finalizer has already cleaned up.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, app)
	}
	if controllerutil.AddFinalizer(app, Finalizer) {
		// Before any child exists, so none can be left behind.
		if err := r.Client.Update(ctx, app); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}

	hash := ConfigHash(app.Spec.Config)
	if r.Options.Bug == StaleStatus {
		if err := r.reportFirst(ctx, app, hash); err != nil {
			return ctrl.Result{}, err
		}
	}

	var dep *appsv1.Deployment
	for _, c := range childrenOf(app) {
		if err := r.apply(ctx, app, c, hash); err != nil {
			return ctrl.Result{}, err
		}
		if d, ok := c.obj.(*appsv1.Deployment); ok {
			dep = d
		}
	}

	if r.Options.Bug != StaleStatus {
		// From the Deployment as this pass left it: a template it has just
		// been given is not yet rolled out.
		if err := r.updateStatus(ctx, app, desiredStatus(app, dep, hash)); err != nil {
			return ctrl.Result{}, err
		}
	}

	if r.Options.Bug == RequeueStorm {
		return r.heartbeat(ctx, app)
	}
	return ctrl.Result{}, nil
}

// reportFirst is the stale-status mutant's status write. Bug: it reports
// before acting, from the Deployment as it was before this pass changed it.
func (r *Reconciler) reportFirst(ctx context.Context, app *v1alpha1.WebApp, hash string) error {
	stale := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(app), stale); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		stale = nil
	}
	return r.updateStatus(ctx, app, desiredStatus(app, stale, hash))
}

// heartbeat is the requeue-storm mutant's last step. Bug: it stamps the
// time on every pass, a write that triggers the next pass, and requeues
// for good measure.
func (r *Reconciler) heartbeat(ctx context.Context, app *v1alpha1.WebApp) (ctrl.Result, error) {
	app.Annotations = with(app.Annotations, map[string]string{reconciledAtAnnotation: time.Now().UTC().Format(time.RFC3339Nano)})
	if err := r.Client.Update(ctx, app); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// apply creates or updates c as app wants it, controlled by app; it writes
// only when something differs.
func (r *Reconciler) apply(ctx context.Context, app *v1alpha1.WebApp, c child, hash string) error {
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, c.obj, func() error {
		undo := r.inputBug(c.obj)
		setChild(c.obj, app, hash)
		undo()
		if r.Options.Bug == NoOwner {
			// Bug: the owner reference is forgotten.
			return nil
		}
		return controllerutil.SetControllerReference(app, c.obj, r.Scheme)
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.kind, c.obj.GetName(), err)
	}
	switch op {
	case controllerutil.OperationResultCreated:
		r.record(ctx, app, c, "Created", "Create")
	case controllerutil.OperationResultUpdated:
		r.record(ctx, app, c, "Updated", "Update")
	}
	return nil
}

// inputBug is what the input-handling mutants keep of an existing child
// as setChild makes it what app asks for: the call it returns puts it
// back. The correct operator keeps nothing.
func (r *Reconciler) inputBug(obj client.Object) (undo func()) {
	if created := obj.GetCreationTimestamp(); created.IsZero() {
		return func() {}
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if r.Options.Bug == ScaleUpOnly && o.Spec.Replicas != nil {
			// Bug: replicas are only ever raised.
			was := *o.Spec.Replicas
			return func() { o.Spec.Replicas = ptr.To(max(was, ptr.Deref(o.Spec.Replicas, 0))) }
		}
	case *corev1.Service:
		if r.Options.Bug == PortOnCreate && len(o.Spec.Ports) > 0 {
			// Bug: the port is set when the Service is created, never after.
			was := o.Spec.Ports[0].Port
			return func() {
				if len(o.Spec.Ports) > 0 {
					o.Spec.Ports[0].Port = was
				}
			}
		}
	}
	return func() {}
}

// updateStatus writes status if it differs from app's. The write carries
// app's resourceVersion: if the cache was behind, it fails with 409 and the
// pass is retried on a fresher app.
func (r *Reconciler) updateStatus(ctx context.Context, app *v1alpha1.WebApp, status v1alpha1.WebAppStatus) error {
	if apiequality.Semantic.DeepEqual(app.Status, status) {
		return nil
	}
	app.Status = status
	if err := r.Client.Status().Update(ctx, app); err != nil {
		return fmt.Errorf("updating the status: %w", err)
	}
	return nil
}

// finalize deletes app's children, and once they are gone removes the
// finalizer, which lets the WebApp go.
func (r *Reconciler) finalize(ctx context.Context, app *v1alpha1.WebApp) error {
	if !controllerutil.ContainsFinalizer(app, Finalizer) {
		return nil
	}
	if r.Options.Bug != FinalizerEarly {
		remaining, err := r.deleteChildren(ctx, app)
		if err != nil {
			return err
		}
		if remaining > 0 {
			// Their deletion comes back as events and brings us here again.
			return nil
		}
	}
	// With FinalizerEarly, straight here. Bug: "the garbage collector
	// deletes the children anyway", but only after the WebApp is gone,
	// and never what lies outside the cluster.
	controllerutil.RemoveFinalizer(app, Finalizer)
	if err := r.Client.Update(ctx, app); err != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	return nil
}

// deleteChildren deletes the children app controls and returns how many of
// them still exist. Objects of the same names that app does not control are
// not its children and are left alone. It reads them from the API server:
// a child created just before the WebApp's deletion may not be in the
// cache yet, and "not found" there would let the WebApp go before it.
func (r *Reconciler) deleteChildren(ctx context.Context, app *v1alpha1.WebApp) (int, error) {
	remaining := 0
	for _, c := range childrenOf(app) {
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(c.obj), c.obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return 0, fmt.Errorf("%s %s: %w", c.kind, c.obj.GetName(), err)
		}
		if !metav1.IsControlledBy(c.obj, app) {
			continue
		}
		remaining++
		if c.obj.GetDeletionTimestamp() != nil {
			continue
		}
		// The UID precondition: never a same-named successor.
		err := r.Client.Delete(ctx, c.obj, client.Preconditions{UID: ptr.To(c.obj.GetUID())})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return 0, fmt.Errorf("deleting %s %s: %w", c.kind, c.obj.GetName(), err)
		default:
			r.record(ctx, app, c, "Deleted", "Delete")
		}
	}
	return remaining, nil
}

func (r *Reconciler) record(ctx context.Context, app *v1alpha1.WebApp, c child, reason, action string) {
	logf.FromContext(ctx).Info(reason+" "+c.kind, "name", c.obj.GetName())
	r.Recorder.Eventf(app, c.obj, corev1.EventTypeNormal, reason, action, "%s %s %s", reason, c.kind, c.obj.GetName())
}
