package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/sim/fake/internal/apply"
	"github.com/converge-lab/converge/sim/fake/internal/builtin"
)

// Door 2: the Kubernetes REST API as an http.Handler over the same store,
// for clients built from a *rest.Config: controller-runtime managers,
// generated clientsets of custom resources, dynamic clients, informers.
// Objects cross it as JSON, as they cross a real server.

// maxBodyBytes is the largest request body the API server reads.
const maxBodyBytes = 3 << 20

// handler serves the REST API of a store.
type handler struct {
	s *store
}

func (h *handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			writeError(w, apierrors.NewInternalError(fmt.Errorf("the fake API server panicked: %v", p)))
		}
	}()
	if err := h.serve(w, req); err != nil {
		writeError(w, err)
	}
}

func (h *handler) serve(w http.ResponseWriter, req *http.Request) error {
	if !acceptsJSON(req.Header.Get("Accept")) {
		return statusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"only the following media types are accepted: application/json, application/yaml")
	}
	path := strings.Trim(req.URL.Path, "/")
	segs := strings.Split(path, "/")
	switch {
	case path == "version":
		return writeJSON(w, http.StatusOK, &version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2", Platform: "linux/amd64"})
	case path == "api" || path == "apis":
		return h.discovery(w, req, path)
	case segs[0] == "api" && len(segs) >= 2:
		return h.resourceRequest(w, req, schema.GroupVersion{Version: segs[1]}, segs[2:])
	case segs[0] == "apis" && len(segs) >= 3:
		return h.resourceRequest(w, req, schema.GroupVersion{Group: segs[1], Version: segs[2]}, segs[3:])
	}
	return notFound()
}

func notFound() error {
	return statusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

// acceptsJSON: the client takes JSON (client-go asks for
// "application/json, */*"; protobuf and CBOR are not served).
func acceptsJSON(accept string) bool {
	if accept == "" {
		return true
	}
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "*/*", "application/*", "application/yaml":
			return true
		}
	}
	return false
}

// discovery serves /api and /apis, in the aggregated form when the client
// asks for it first (client-go does).
func (h *handler) discovery(w http.ResponseWriter, req *http.Request, path string) error {
	if req.Method != http.MethodGet {
		return methodNotAllowed(req.Method)
	}
	aggregated := strings.Contains(req.Header.Get("Accept"), "as=APIGroupDiscoveryList")
	h.s.mu.Lock()
	extra := h.s.customDiscovery()
	h.s.mu.Unlock()
	var doc any
	switch {
	case path == "api" && aggregated:
		doc = builtin.AggregatedAPI()
	case path == "api":
		doc = builtin.APIVersions()
	case aggregated:
		doc = builtin.AggregatedAPIs(extra)
	default:
		doc = builtin.APIGroupList(extra)
	}
	if aggregated {
		w.Header().Set("Content-Type", discovery.AcceptV2)
		data, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
		return nil
	}
	return writeJSON(w, http.StatusOK, doc)
}

// customDiscovery describes the served custom resources (and the CRD
// resource) for the discovery builders. Callers hold s.mu.
func (s *store) customDiscovery() []builtin.Resource {
	extra := []builtin.Resource{s.kinds.builtin(crdsGVR).info}
	for _, r := range s.kinds.customResources() {
		for _, v := range r.crd.Versions() {
			d := builtin.Resource{
				GVR:  schema.GroupVersionResource{Group: r.gvr.Group, Version: v, Resource: r.gvr.Resource},
				Kind: r.kind, Singular: r.crd.Singular(), Namespaced: r.namespaced,
				Verbs:      []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"},
				ShortNames: r.crd.ShortNames(), Categories: r.crd.Categories(),
			}
			if r.crd.HasStatus(v) {
				d.Subresources = append(d.Subresources, builtin.Subresource{Name: "status", Kind: r.kind, Verbs: []string{"get", "patch", "update"}})
			}
			if r.crd.Scale(v) != nil {
				d.Subresources = append(d.Subresources, builtin.Subresource{Name: "scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Verbs: []string{"get", "patch", "update"}})
			}
			extra = append(extra, d)
		}
	}
	return extra
}

// request is one resource request, parsed from its path.
type request struct {
	gv          schema.GroupVersion
	r           *resource
	namespace   string
	name        string
	subresource string
}

// resourceRequest serves everything under /api/v1 and /apis/{group}/{version}.
func (h *handler) resourceRequest(w http.ResponseWriter, req *http.Request, gv schema.GroupVersion, segs []string) error {
	if len(segs) == 0 || len(segs) == 1 && segs[0] == "" {
		if req.Method != http.MethodGet {
			return methodNotAllowed(req.Method)
		}
		h.s.mu.Lock()
		extra := h.s.customDiscovery()
		h.s.mu.Unlock()
		list, ok := builtin.APIResourceList(gv, extra)
		if !ok {
			return notFound()
		}
		return writeJSON(w, http.StatusOK, list)
	}
	for _, s := range segs {
		if s == "" {
			return notFound()
		}
	}
	rq := request{gv: gv}
	var resourceName string
	switch {
	case segs[0] == "namespaces" && len(segs) == 3 && (segs[2] == "status" || segs[2] == "finalize"):
		resourceName, rq.name, rq.subresource = "namespaces", segs[1], segs[2]
	case segs[0] == "namespaces" && len(segs) >= 3:
		rq.namespace, resourceName = segs[1], segs[2]
		rest := segs[3:]
		if len(rest) > 2 {
			return notFound()
		}
		if len(rest) >= 1 {
			rq.name = rest[0]
		}
		if len(rest) == 2 {
			rq.subresource = rest[1]
		}
	default:
		if len(segs) > 3 {
			return notFound()
		}
		resourceName = segs[0]
		if len(segs) >= 2 {
			rq.name = segs[1]
		}
		if len(segs) == 3 {
			rq.subresource = segs[2]
		}
	}
	h.s.mu.Lock()
	r, err := h.s.kinds.resolve(gv.WithResource(resourceName))
	h.s.mu.Unlock()
	if err != nil {
		return notFound()
	}
	rq.r = r
	if u, ok := impersonated(req); ok {
		if err := h.s.authorize(u, verbOf(req, rq), rq); err != nil {
			return err
		}
	}
	if r.namespaced == (rq.namespace == "") && !(r.namespaced && rq.name == "" && req.Method == http.MethodGet) {
		// A namespaced resource by name needs its namespace, and a
		// cluster-scoped one has none; listing across namespaces is fine.
		return notFound()
	}
	return h.verb(w, req, rq)
}

func methodNotAllowed(method string) error {
	return statusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("the server does not allow this method on the requested resource: %s", method))
}

// verb dispatches by method, as the API server's routes do.
func (h *handler) verb(w http.ResponseWriter, req *http.Request, rq request) error {
	q := req.URL.Query()
	ctx := req.Context()
	switch rq.subresource {
	case "", "status", "scale", "finalize", "binding", "eviction":
	default:
		return notFound()
	}
	switch {
	case rq.name == "" && req.Method == http.MethodGet:
		if isTrue(q.Get("watch")) {
			return h.watch(w, req, rq)
		}
		return h.list(w, rq, q)
	case rq.name == "" && req.Method == http.MethodPost:
		if rq.r.gvr == corev1.SchemeGroupVersion.WithResource("bindings") {
			return h.bind(w, req, rq, "")
		}
		return h.create(ctx, w, req, rq, q)
	case rq.name == "" && req.Method == http.MethodDelete:
		return h.deleteCollection(ctx, w, req, rq, q)
	case rq.name == "":
		return methodNotAllowed(req.Method)
	}
	if rq.subresource == "scale" {
		return h.scale(ctx, w, req, rq, q)
	}
	switch req.Method {
	case http.MethodGet:
		if rq.subresource != "" && rq.subresource != "status" {
			return methodNotAllowed(req.Method)
		}
		if rq.subresource == "status" && !rq.r.status {
			return notFound()
		}
		obj, err := h.s.get(rq.r, rq.namespace, rq.name)
		if err != nil {
			return err
		}
		return writeObject(w, http.StatusOK, rq, obj)
	case http.MethodPut:
		if rq.subresource != "" && rq.subresource != "status" && rq.subresource != "finalize" {
			return methodNotAllowed(req.Method)
		}
		return h.update(ctx, w, req, rq, q)
	case http.MethodPatch:
		if rq.subresource != "" && rq.subresource != "status" {
			return methodNotAllowed(req.Method)
		}
		return h.patch(ctx, w, req, rq, q)
	case http.MethodDelete:
		if rq.subresource != "" {
			return methodNotAllowed(req.Method)
		}
		return h.delete(ctx, w, req, rq, q)
	case http.MethodPost:
		switch {
		case rq.subresource == "binding" && rq.r.gvr == podsGVR:
			return h.bind(w, req, rq, rq.name)
		case rq.subresource == "eviction" && rq.r.gvr == podsGVR:
			return h.evict(ctx, w, req, rq)
		}
	}
	return methodNotAllowed(req.Method)
}

func isTrue(s string) bool { return s == "true" || s == "1" }

// decodeParams reads query parameters into a metav1 options struct, as the
// API server's parameter codec does; an unknown parameter is ignored.
func decodeParams(q url.Values, into runtime.Object) error {
	if err := parameterCodec.DecodeParameters(q, schema.GroupVersion{Version: "v1"}, into); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

func (h *handler) list(w http.ResponseWriter, rq request, q url.Values) error {
	var opts metav1.ListOptions
	if err := decodeParams(q, &opts); err != nil {
		return err
	}
	lo, err := parseListOptions(rq.r, opts)
	if err != nil {
		return err
	}
	objs, rv, next, err := h.s.list(rq.r, rq.namespace, lo)
	if err != nil {
		return err
	}
	listKind := rq.r.kind + "List"
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":%q`, listKind, rq.gv.String(), strconv.FormatInt(rv, 10))
	if next != "" {
		fmt.Fprintf(&buf, `,"continue":%q`, next)
	}
	buf.WriteString(`},"items":[`)
	for i, obj := range objs {
		if i > 0 {
			buf.WriteByte(',')
		}
		data, err := encode(rq, obj, !rq.r.typed())
		if err != nil {
			return err
		}
		buf.Write(data)
	}
	buf.WriteString("]}\n")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// readBody reads a request body of at most maxBodyBytes, as JSON (YAML is
// converted).
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, apierrors.NewBadRequest("the request has no body")
	}
	data, err := io.ReadAll(io.LimitReader(req.Body, maxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if len(data) > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	switch mt {
	case "", "application/json", "application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json":
	case "application/yaml", "application/apply-patch+yaml":
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil, apierrors.NewBadRequest("the body is not valid YAML: " + err.Error())
		}
	default:
		return nil, statusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got %q)", mt))
	}
	return data, nil
}

// decodeObject decodes a request body as an object of the resource, in
// the request's version.
func decodeObject(rq request, data []byte) (runtime.Object, error) {
	if rq.r.typed() {
		obj := rq.r.newObject(rq.gv.Version)
		gvk := rq.gv.WithKind(rq.r.kind)
		out, got, err := jsonSerializer.Decode(data, &gvk, obj)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if *got != gvk {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", got.GroupVersion(), rq.gv))
		}
		m, err := meta.TypeAccessor(out)
		if err == nil {
			m.SetAPIVersion("")
			m.SetKind("")
		}
		return out, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if u.GetAPIVersion() != rq.gv.String() || u.GetKind() != rq.r.kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", u.GetAPIVersion(), rq.gv))
	}
	return u, nil
}

var parameterCodec = runtime.NewParameterCodec(apiScheme)

var jsonSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, apiScheme, apiScheme, kjson.SerializerOptions{})

// writeOpts are a write's options from its query's fieldManager and dryRun.
func writeOpts(manager string, dryRun []string) (writeOptions, error) {
	for _, d := range dryRun {
		if d != metav1.DryRunAll {
			return writeOptions{}, apierrors.NewBadRequest(fmt.Sprintf("unsupported dryRun value %q", d))
		}
	}
	return writeOptions{manager: manager, dryRun: len(dryRun) > 0}, nil
}

func (h *handler) create(ctx context.Context, w http.ResponseWriter, req *http.Request, rq request, q url.Values) error {
	var opts metav1.CreateOptions
	if err := decodeParams(q, &opts); err != nil {
		return err
	}
	o, err := writeOpts(opts.FieldManager, opts.DryRun)
	if err != nil {
		return err
	}
	o.manager = apply.DefaultFieldManager(o.manager, req.UserAgent())
	data, err := readBody(req)
	if err != nil {
		return err
	}
	obj, err := decodeObject(rq, data)
	if err != nil {
		return err
	}
	stored, err := h.s.create(ctx, rq.r, rq.namespace, obj, o)
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusCreated, rq, stored)
}

func (h *handler) update(ctx context.Context, w http.ResponseWriter, req *http.Request, rq request, q url.Values) error {
	var opts metav1.UpdateOptions
	if err := decodeParams(q, &opts); err != nil {
		return err
	}
	o, err := writeOpts(opts.FieldManager, opts.DryRun)
	if err != nil {
		return err
	}
	o.manager = apply.DefaultFieldManager(o.manager, req.UserAgent())
	o.put = true
	data, err := readBody(req)
	if err != nil {
		return err
	}
	obj, err := decodeObject(rq, data)
	if err != nil {
		return err
	}
	m, _ := meta.Accessor(obj)
	if m.GetName() != rq.name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), rq.name))
	}
	if rq.r.namespaced && m.GetNamespace() != "" && m.GetNamespace() != rq.namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	stored, err := h.s.update(ctx, rq.r, rq.namespace, obj, rq.subresource, "", o)
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusOK, rq, stored)
}

func (h *handler) patch(ctx context.Context, w http.ResponseWriter, req *http.Request, rq request, q url.Values) error {
	var opts metav1.PatchOptions
	if err := decodeParams(q, &opts); err != nil {
		return err
	}
	o, err := writeOpts(opts.FieldManager, opts.DryRun)
	if err != nil {
		return err
	}
	data, err := readBody(req)
	if err != nil {
		return err
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	pt := types.PatchType(mt)
	if pt == types.ApplyPatchType {
		obj, created, err := h.s.apply(ctx, rq.r, rq.namespace, rq.name, rq.subresource, data, opts.FieldManager, opts.Force != nil && *opts.Force, o.dryRun)
		if err != nil {
			return err
		}
		code := http.StatusOK
		if created {
			code = http.StatusCreated
		}
		return writeObject(w, code, rq, obj)
	}
	o.manager = apply.DefaultFieldManager(o.manager, req.UserAgent())
	obj, err := h.s.patch(ctx, rq.r, rq.namespace, rq.name, rq.subresource, pt, data, o)
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusOK, rq, obj)
}

func (h *handler) delete(ctx context.Context, w http.ResponseWriter, req *http.Request, rq request, q url.Values) error {
	opts, err := deleteOptions(req, q)
	if err != nil {
		return err
	}
	obj, err := h.s.delete(ctx, rq.r, rq.namespace, rq.name, opts)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if m, _ := meta.Accessor(obj); m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) > 0 {
		code = http.StatusAccepted
	}
	return writeObject(w, code, rq, obj)
}

// deleteOptions are a delete's options, from its body or its query.
func deleteOptions(req *http.Request, q url.Values) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	if err := decodeParams(q, &opts); err != nil {
		return opts, err
	}
	if req.Body != nil && req.ContentLength != 0 {
		data, err := readBody(req)
		if err != nil {
			return opts, err
		}
		if len(bytes.TrimSpace(data)) > 0 {
			if err := json.Unmarshal(data, &opts); err != nil {
				return opts, apierrors.NewBadRequest("the body is not DeleteOptions: " + err.Error())
			}
		}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		opts.GracePeriodSeconds = new(int64(1))
	}
	return opts, nil
}

func (h *handler) deleteCollection(ctx context.Context, w http.ResponseWriter, req *http.Request, rq request, q url.Values) error {
	var lopts metav1.ListOptions
	if err := decodeParams(q, &lopts); err != nil {
		return err
	}
	lo, err := parseListOptions(rq.r, lopts)
	if err != nil {
		return err
	}
	opts, err := deleteOptions(req, q)
	if err != nil {
		return err
	}
	if err := h.s.deleteCollection(ctx, rq.r, rq.namespace, lo, opts); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

func (h *handler) bind(w http.ResponseWriter, req *http.Request, rq request, pod string) error {
	data, err := readBody(req)
	if err != nil {
		return err
	}
	var b corev1.Binding
	if err := json.Unmarshal(data, &b); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if pod != "" && b.Name != pod {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the binding (%s) does not match the pod (%s)", b.Name, pod))
	}
	if err := h.s.bind(rq.namespace, &b); err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

// evict is pods/eviction without disruption budgets: the pod is deleted
// with the eviction's options.
func (h *handler) evict(ctx context.Context, w http.ResponseWriter, req *http.Request, rq request) error {
	data, err := readBody(req)
	if err != nil {
		return err
	}
	var e policyv1.Eviction
	if err := json.Unmarshal(data, &e); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if e.Name != rq.name {
		return apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	var opts metav1.DeleteOptions
	if e.DeleteOptions != nil {
		opts = *e.DeleteOptions
	}
	if _, err := h.s.delete(ctx, rq.r, rq.namespace, rq.name, opts); err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

// encode is obj as JSON in the request's version; withType adds kind and
// apiVersion (a list's typed items go without, as a real server's do).
func encode(rq request, obj runtime.Object, withType bool) ([]byte, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if u.GetAPIVersion() != rq.gv.String() {
			c := shallowCopy(u).(*unstructured.Unstructured)
			c.SetAPIVersion(rq.gv.String())
			u = c
		}
		return u.MarshalJSON()
	}
	if withType {
		c := shallowCopy(obj)
		c.GetObjectKind().SetGroupVersionKind(rq.gv.WithKind(rq.r.kind))
		obj = c
	}
	return json.Marshal(obj)
}

func writeObject(w http.ResponseWriter, code int, rq request, obj runtime.Object) error {
	data, err := encode(rq, obj, true)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
	return nil
}

// writeError answers with err as a metav1.Status, as the API server does.
func writeError(w http.ResponseWriter, err error) {
	var status metav1.Status
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		status = apiStatus.Status()
	} else {
		status = apierrors.NewInternalError(err).Status()
	}
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	_ = writeJSON(w, int(status.Code), &status)
}

// watch streams a watch as the API server does: one JSON frame per event,
// flushed, until the client goes, the timeout ends it or the store stops.
// A resourceVersion older than the history is an ERROR event with 410, as
// the watch cache answers it.
func (h *handler) watch(w http.ResponseWriter, req *http.Request, rq request) error {
	var opts metav1.ListOptions
	if err := decodeParams(req.URL.Query(), &opts); err != nil {
		return err
	}
	wo, err := parseWatchOptions(rq.r, opts)
	if err != nil {
		return err
	}
	flusher, _ := w.(http.Flusher)
	ww, err := h.s.watch(rq.r, rq.namespace, wo)
	expired := apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	if err != nil && !expired {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	if expired {
		status := err.(apierrors.APIStatus).Status()
		status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		_, _ = w.Write(watchFrame(watch.Error, mustJSON(&status)))
		return nil
	}
	defer ww.Stop()
	var timeout <-chan time.Time
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		t := time.NewTimer(time.Duration(*opts.TimeoutSeconds) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case e, ok := <-ww.ResultChan():
			if !ok {
				return nil
			}
			data, err := h.s.encode(rq, e.Object)
			if err != nil {
				return nil
			}
			if _, err := w.Write(watchFrame(e.Type, data)); err != nil {
				return nil // the client went
			}
			if flusher != nil {
				flusher.Flush()
			}
		case <-timeout:
			return nil
		case <-req.Context().Done():
			return nil
		}
	}
}

// watchFrame is a watch event on the wire, object being compact JSON (as
// encode makes it), the line a server's JSON watch writes.
func watchFrame(typ watch.EventType, object []byte) []byte {
	object = bytes.TrimRight(object, "\n")
	b := make([]byte, 0, len(`{"type":"","object":}`)+len(typ)+len(object)+1)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","object":`...)
	b = append(b, object...)
	return append(b, "}\n"...)
}

// encodingKey is an object as a REST watch encodes it (store.encoded).
type encodingKey struct {
	obj  runtime.Object // compared by pointer: a stored object is never changed
	gv   schema.GroupVersion
	kind string
}

// encodingsKept bounds store.encoded.
const encodingsKept = 256

// encode is encode(rq, obj, true), from s.encoded when a watch sent obj
// in this version before: every change reaches each watch of its
// resource (a run's controller's informer and converge's observer at
// least) as the same stored object. The bytes returned are shared: not
// to be changed.
func (s *store) encode(rq request, obj runtime.Object) ([]byte, error) {
	k := encodingKey{obj: obj, gv: rq.gv, kind: rq.r.kind}
	if data, ok := s.encoded.Get(k); ok {
		return data, nil
	}
	data, err := encode(rq, obj, true)
	if err != nil {
		return nil, err
	}
	s.encoded.Put(k, data)
	return data, nil
}

func mustJSON(v any) json.RawMessage {
	data, _ := json.Marshal(v)
	return data
}

// scale serves the scale subresource of Deployments, ReplicaSets,
// StatefulSets, ReplicationControllers and custom resources that declare
// one: an autoscaling/v1 Scale read from and written to the parent.
func (h *handler) scale(ctx context.Context, w http.ResponseWriter, req *http.Request, rq request, q url.Values) error {
	paths, ok := scalePaths(rq.r)
	if !ok {
		return notFound()
	}
	switch req.Method {
	case http.MethodGet:
		obj, err := h.s.get(rq.r, rq.namespace, rq.name)
		if err != nil {
			return err
		}
		sc, err := scaleOf(obj, paths)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, sc)
	case http.MethodPut, http.MethodPatch:
		data, err := readBody(req)
		if err != nil {
			return err
		}
		mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		obj, err := h.s.writeScale(ctx, rq.r, rq.namespace, rq.name, paths, req.Method == http.MethodPatch, types.PatchType(mt), data)
		if err != nil {
			return err
		}
		sc, err := scaleOf(obj, paths)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, sc)
	}
	return methodNotAllowed(req.Method)
}

// scaleSpec says where a resource keeps what its Scale shows.
type scaleSpec struct {
	specReplicas, statusReplicas, selector string
	selectorIsLabelSelector                bool // a built-in's spec.selector, not a string
}

func scalePaths(r *resource) (scaleSpec, bool) {
	if r.crd != nil {
		s := r.crd.Scale(r.storage)
		if s == nil {
			return scaleSpec{}, false
		}
		sel := ""
		if s.LabelSelectorPath != nil {
			sel = *s.LabelSelectorPath
		}
		return scaleSpec{specReplicas: s.SpecReplicasPath, statusReplicas: s.StatusReplicasPath, selector: sel}, true
	}
	switch r.gvr.Resource {
	case "deployments", "replicasets", "statefulsets":
		return scaleSpec{".spec.replicas", ".status.replicas", ".spec.selector", true}, true
	case "replicationcontrollers":
		return scaleSpec{".spec.replicas", ".status.replicas", ".spec.selector", false}, true
	}
	return scaleSpec{}, false
}

func fieldPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

func toMap(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

func scaleOf(obj runtime.Object, p scaleSpec) (*autoscalingv1.Scale, error) {
	m, err := toMap(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	om, _ := meta.Accessor(obj)
	sc := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: om.GetName(), Namespace: om.GetNamespace(), UID: om.GetUID(),
			ResourceVersion: om.GetResourceVersion(), CreationTimestamp: om.GetCreationTimestamp()},
	}
	spec, _, _ := unstructured.NestedFieldNoCopy(m, fieldPath(p.specReplicas)...)
	sc.Spec.Replicas = int32(asInt(spec))
	status, _, _ := unstructured.NestedFieldNoCopy(m, fieldPath(p.statusReplicas)...)
	sc.Status.Replicas = int32(asInt(status))
	if p.selector != "" {
		sel, _, _ := unstructured.NestedFieldNoCopy(m, fieldPath(p.selector)...)
		switch s := sel.(type) {
		case string:
			sc.Status.Selector = s
		case map[string]any:
			var ls metav1.LabelSelector
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s, &ls); err == nil {
				if p.selectorIsLabelSelector {
					if parsed, err := metav1.LabelSelectorAsSelector(&ls); err == nil {
						sc.Status.Selector = parsed.String()
					}
				} else {
					sc.Status.Selector = mapSelector(s)
				}
			}
		}
	}
	return sc, nil
}

func mapSelector(m map[string]any) string {
	set := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			set[k] = s
		}
	}
	return metav1.FormatLabelSelector(metav1.SetAsLabelSelector(set))
}

func asInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int32:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

// writeScale writes a Scale (sent whole, or as a patch of the current one)
// to its parent's replicas.
func (s *store) writeScale(ctx context.Context, r *resource, ns, name string, p scaleSpec, isPatch bool, pt types.PatchType, data []byte) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped()
	}
	stored, err := s.lookup(r, ns, name)
	if err != nil {
		return nil, err
	}
	current, err := scaleOf(stored, p)
	if err != nil {
		return nil, err
	}
	var want autoscalingv1.Scale
	if isPatch {
		scaleRes := &resource{gvr: autoscalingv1.SchemeGroupVersion.WithResource("scale"), storage: "v1", kind: "Scale", goType: reflectType(&autoscalingv1.Scale{})}
		out, err := applyPatch(scaleRes, current, pt, data)
		if err != nil {
			return nil, err
		}
		want = *out.(*autoscalingv1.Scale)
	} else if err := json.Unmarshal(data, &want); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if want.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, name,
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0")})
	}
	m, err := toMap(stored)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	m = runtime.DeepCopyJSON(m)
	if err := unstructured.SetNestedField(m, int64(want.Spec.Replicas), fieldPath(p.specReplicas)...); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := r.newObject(r.storage)
	if u, ok := out.(*unstructured.Unstructured); ok {
		u.Object = m
	} else if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, out); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	precondition := want.ResourceVersion
	return s.updateLocked(ctx, r, ns, out, "", precondition, writeOptions{manager: "scale"})
}

// apply is server-side apply: patch by manager onto the stored object, or
// a create when there is none.
func (s *store) apply(ctx context.Context, r *resource, ns, name, subresource string, patch []byte, manager string, force, dryRun bool) (runtime.Object, bool, error) {
	m, err := r.applyManager()
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, errStopped()
	}
	if !r.namespaced {
		ns = ""
	}
	stored, err := s.lookup(r, ns, name)
	var live runtime.Object
	switch {
	case err == nil:
		live = stored
	case apierrors.IsNotFound(err) && subresource == "":
	default:
		return nil, false, err
	}
	out, err := m.Apply(ctx, live, patch, manager, subresource, force)
	if err != nil {
		return nil, false, err
	}
	om, _ := meta.Accessor(out)
	if om.GetName() != name {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", om.GetName(), name))
	}
	if r.namespaced && om.GetNamespace() != "" && om.GetNamespace() != ns {
		return nil, false, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	o := writeOptions{manager: manager, applied: true, dryRun: dryRun}
	if live == nil {
		obj, err := s.createLocked(ctx, r, ns, out, o)
		return obj, true, err
	}
	precondition := ""
	if rv := om.GetResourceVersion(); rv != "" && rv != stored.(metav1.Object).GetResourceVersion() {
		precondition = rv
	}
	obj, err := s.updateLocked(ctx, r, ns, out, subresource, precondition, o)
	return obj, false, err
}

// patch applies a JSON, merge or strategic merge patch to the stored
// object and writes the result as an update.
func (s *store) patch(ctx context.Context, r *resource, ns, name, subresource string, pt types.PatchType, patch []byte, o writeOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped()
	}
	if !r.namespaced {
		ns = ""
	}
	stored, err := s.lookup(r, ns, name)
	if err != nil {
		return nil, err
	}
	out, err := applyPatch(r, stored, pt, patch)
	if err != nil {
		return nil, err
	}
	om, _ := meta.Accessor(out)
	sm, _ := meta.Accessor(stored)
	precondition := sm.GetResourceVersion()
	if om.GetResourceVersion() != sm.GetResourceVersion() {
		precondition = om.GetResourceVersion()
	}
	if om.GetName() != sm.GetName() {
		return nil, apierrors.NewBadRequest("the name of a patched object cannot change")
	}
	return s.updateLocked(ctx, r, ns, out, subresource, precondition, o)
}
