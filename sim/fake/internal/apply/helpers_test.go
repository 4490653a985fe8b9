package apply

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

var deploymentGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")

// firstForBuiltin is how long the first ForBuiltin of the process took,
// measured before any test can have paid for the schema.
var firstForBuiltin time.Duration

func TestMain(m *testing.M) {
	start := time.Now()
	if _, err := ForBuiltin(deploymentGVK); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	firstForBuiltin = time.Since(start)
	os.Exit(m.Run())
}

// step is one write in a scenario: an apply when patch is set, otherwise an
// Update of what write makes of a copy of the live object (of blank() when
// there is none).
type step struct {
	manager string
	sub     string
	patch   string
	write   func(obj runtime.Object)
	force   bool

	// wantCode is the HTTP code of the expected error; zero means success.
	wantCode   int32
	wantCauses []metav1.StatusCause
}

// play runs steps against one object the way a store would: each result
// becomes the live object, stamped with a uid once it exists.
func play(t *testing.T, m *Manager, blank func() runtime.Object, steps []step) runtime.Object {
	t.Helper()
	ctx := context.Background()
	var live runtime.Object
	for i, s := range steps {
		var out runtime.Object
		var err error
		if s.patch != "" {
			out, err = m.Apply(ctx, live, []byte(s.patch), s.manager, s.sub, s.force)
		} else {
			obj := blank()
			if live != nil {
				obj = live.DeepCopyObject()
			}
			s.write(obj)
			out, err = m.Update(ctx, live, obj, s.manager, s.sub)
		}
		if s.wantCode != 0 {
			requireStatus(t, err, s.wantCode, s.wantCauses)
			continue
		}
		require.NoError(t, err, "step %d", i)
		acc, err := meta.Accessor(out)
		require.NoError(t, err)
		acc.SetUID(types.UID("uid-1"))
		live = out
	}
	return live
}

func requireStatus(t *testing.T, err error, code int32, causes []metav1.StatusCause) {
	t.Helper()
	var se *apierrors.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, code, se.ErrStatus.Code, se.ErrStatus.Message)
	if causes != nil {
		require.NotNil(t, se.ErrStatus.Details)
		assert.Equal(t, causes, se.ErrStatus.Details.Causes)
	}
}

// conflict is the cause the server reports for one conflicting field.
func conflict(field, manager string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Field: field, Message: "conflict with " + manager}
}

// owned is the fieldsV1 of manager's entry for operation and subresource, as
// JSON; it fails the test when there is no such entry, or more than one.
func owned(t *testing.T, obj runtime.Object, manager string, op metav1.ManagedFieldsOperationType, sub string) string {
	t.Helper()
	acc, err := meta.Accessor(obj)
	require.NoError(t, err)
	var found []metav1.ManagedFieldsEntry
	for _, e := range acc.GetManagedFields() {
		if e.Manager == manager && e.Operation == op && e.Subresource == sub {
			found = append(found, e)
		}
	}
	require.Len(t, found, 1, "entries of %s %s %q: %+v", manager, op, sub, acc.GetManagedFields())
	e := found[0]
	assert.Equal(t, "FieldsV1", e.FieldsType)
	require.NotNil(t, e.FieldsV1)
	return string(e.FieldsV1.Raw)
}

func managers(t *testing.T, obj runtime.Object) []string {
	t.Helper()
	acc, err := meta.Accessor(obj)
	require.NoError(t, err)
	var out []string
	for _, e := range acc.GetManagedFields() {
		out = append(out, fmt.Sprintf("%s/%s/%s/%s", e.Manager, e.Operation, e.APIVersion, e.Subresource))
	}
	return out
}
