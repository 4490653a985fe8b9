package fake

import (
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	"github.com/converge-lab/converge/internal/bounded"
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
		m.delegate = discoveryMapper(extra)
	}
	return m.delegate
}

// discoveryMappers are the mappers built, by what the servers served
// beside the built-in resources: every run of a scenario serves the same
// on a server of its own, and building one over every built-in group was
// a hundredth of a short run's CPU. A mapper is only read once built.
var discoveryMappers = bounded.Map[string, meta.RESTMapper]{Limit: 64}

// discoveryMapper is the mapper of the built-in resources and extra.
func discoveryMapper(extra []builtin.Resource) meta.RESTMapper {
	key, err := json.Marshal(extra)
	if err != nil {
		return restmapper.NewDiscoveryRESTMapper(builtin.GroupResources(extra))
	}
	if d, ok := discoveryMappers.Get(string(key)); ok {
		return d
	}
	d := restmapper.NewDiscoveryRESTMapper(builtin.GroupResources(extra))
	discoveryMappers.Put(string(key), d)
	return d
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
