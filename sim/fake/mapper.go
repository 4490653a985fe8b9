package fake

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	"github.com/converge-lab/converge/sim/fake/internal/builtin"
)

// mapper maps kinds to the resources the in-memory API serves, read from
// its registry as its discovery documents are (builtin.GroupResources):
// the answers client-go's discovery-backed mapper gives, without encoding
// and decoding the documents (a sixth of a short run's CPU on the harness's
// own mapper). Reset reads them again, for a CRD established since.
type mapper struct {
	s        *store
	mu       sync.Mutex
	delegate meta.RESTMapper
}

var _ meta.ResettableRESTMapper = (*mapper)(nil)

func (m *mapper) get() meta.RESTMapper {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.delegate == nil {
		m.s.mu.Lock()
		extra := m.s.customDiscovery()
		m.s.mu.Unlock()
		m.delegate = restmapper.NewDiscoveryRESTMapper(builtin.GroupResources(extra))
	}
	return m.delegate
}

// Reset forgets what was read: the next question reads the registry again.
func (m *mapper) Reset() {
	m.mu.Lock()
	m.delegate = nil
	m.mu.Unlock()
}

func (m *mapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return m.get().KindFor(r)
}

func (m *mapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return m.get().KindsFor(r)
}

func (m *mapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return m.get().ResourceFor(r)
}

func (m *mapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return m.get().ResourcesFor(r)
}

func (m *mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return m.get().RESTMapping(gk, versions...)
}

func (m *mapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return m.get().RESTMappings(gk, versions...)
}

func (m *mapper) ResourceSingularizer(resource string) (string, error) {
	return m.get().ResourceSingularizer(resource)
}
