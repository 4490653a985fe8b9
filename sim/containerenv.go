package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// ErrNoContainer is ReadContainerEnv's error when the manifests hold no
// workload, or no container it was asked for.
var ErrNoContainer = errors.New("no such container")

// EnvVar is one variable of a container's environment.
type EnvVar struct {
	Name, Value string
}

// ContainerEnv is the environment a workload's manifest gives one of its
// containers, as far as the manifest alone says it.
type ContainerEnv struct {
	// Workload names the Deployment, StatefulSet or DaemonSet and the
	// container ("Deployment controller-manager, container manager").
	Workload string
	// Container is the container's name.
	Container string
	// Env are the variables with their values, in the order the
	// container sees them: envFrom's, then env's, a later one replacing
	// an earlier one of the same name, as the kubelet does.
	Env []EnvVar
	// Unresolved are the variables the manifests do not give a value
	// for: a value from the pod (fieldRef, resourceFieldRef), or from a
	// ConfigMap or Secret that is not among the manifests.
	Unresolved []UnresolvedVar
}

// UnresolvedVar is a variable of a container that its manifests give no
// value for, and why.
type UnresolvedVar struct {
	// Name is the variable's name, or for an envFrom source that is not
	// among the manifests, its prefix followed by "*".
	Name, Why string
}

func (u UnresolvedVar) String() string { return u.Name + ": " + u.Why }

// ReadContainerEnv reads the Deployments, StatefulSets and DaemonSets of
// paths (files, folders or kustomizations, as ReadRBAC: a kubebuilder
// project's config/manager) and returns the environment of the container
// named container. With container "", the container named "manager", or
// else the only container of the only workload. Values from a ConfigMap or
// Secret are read from the manifests' own (a kustomize
// configMapGenerator's included); $(NAME) in a value is expanded from the
// variables before it, as the kubelet does. With no workload, or no such
// container, the error is ErrNoContainer; with two, an error naming both.
func ReadContainerEnv(container string, paths ...string) (ContainerEnv, error) {
	docs, err := readPaths(paths)
	if err != nil {
		return ContainerEnv{}, fmt.Errorf("environment: %w", err)
	}
	type workload struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	var (
		workloads []workload
		sources   = map[string]map[string]string{} // "ConfigMap name" and "Secret name": data
	)
	for _, d := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(d.Raw, &tm); err != nil {
			return ContainerEnv{}, fmt.Errorf("environment: %s, document %d: %w", d.Source, d.N, err)
		}
		switch tm.Kind {
		case "Deployment", "StatefulSet", "DaemonSet":
			var w workload
			if err := yaml.Unmarshal(d.Raw, &w); err != nil {
				return ContainerEnv{}, fmt.Errorf("environment: %s, document %d: %w", d.Source, d.N, err)
			}
			workloads = append(workloads, w)
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal(d.Raw, &cm); err != nil {
				return ContainerEnv{}, fmt.Errorf("environment: %s, document %d: %w", d.Source, d.N, err)
			}
			sources["ConfigMap "+cm.Name] = cm.Data
		case "Secret":
			var s corev1.Secret
			if err := yaml.Unmarshal(d.Raw, &s); err != nil {
				return ContainerEnv{}, fmt.Errorf("environment: %s, document %d: %w", d.Source, d.N, err)
			}
			data := map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
			for k, v := range s.StringData {
				data[k] = v
			}
			sources["Secret "+s.Name] = data
		}
	}

	// The container.
	var (
		found []string
		out   ContainerEnv
		c     *corev1.Container
	)
	for i := range workloads {
		w := &workloads[i]
		for j := range w.Spec.Template.Spec.Containers {
			cc := &w.Spec.Template.Spec.Containers[j]
			name := fmt.Sprintf("%s %s, container %s", w.Kind, w.Metadata.Name, cc.Name)
			found = append(found, name)
			if container == "" && cc.Name == "manager" || container != "" && cc.Name == container {
				if c != nil {
					return ContainerEnv{}, fmt.Errorf("environment: two containers named %q in %s: %s and %s", cc.Name, strings.Join(paths, ", "), out.Workload, name)
				}
				c, out.Workload, out.Container = cc, name, cc.Name
			}
		}
	}
	if c == nil && container == "" && len(found) == 1 {
		c, out.Workload = &workloads[0].Spec.Template.Spec.Containers[0], found[0]
		out.Container = c.Name
	}
	if c == nil {
		want := "container " + container
		if container == "" {
			want = `the only container, or one named "manager"`
		}
		if len(found) == 0 {
			return ContainerEnv{}, fmt.Errorf("environment: %w: no Deployment, StatefulSet or DaemonSet in %s", ErrNoContainer, strings.Join(paths, ", "))
		}
		return ContainerEnv{}, fmt.Errorf("environment: %w: %s not in %s, which hold %s", ErrNoContainer, want, strings.Join(paths, ", "), strings.Join(found, "; "))
	}

	// A variable's last source wins, as in the kubelet: drop what an
	// earlier one gave.
	drop := func(name string) {
		out.Env = slices.DeleteFunc(out.Env, func(e EnvVar) bool { return e.Name == name })
		out.Unresolved = slices.DeleteFunc(out.Unresolved, func(u UnresolvedVar) bool { return u.Name == name })
	}
	unresolved := func(name, why string) {
		drop(name)
		out.Unresolved = append(out.Unresolved, UnresolvedVar{Name: name, Why: why})
	}
	set := func(name, value string) {
		if msgs := validation.IsEnvVarName(name); len(msgs) > 0 {
			unresolved(name, "not a variable a process can have: "+strings.Join(msgs, "; "))
			return
		}
		if strings.ContainsRune(value, 0) {
			unresolved(name, "not a variable a process can have: its value holds a NUL byte")
			return
		}
		drop(name)
		out.Env = append(out.Env, EnvVar{Name: name, Value: value})
	}
	for _, from := range c.EnvFrom {
		var key string
		var optional *bool
		switch {
		case from.ConfigMapRef != nil:
			key, optional = "ConfigMap "+from.ConfigMapRef.Name, from.ConfigMapRef.Optional
		case from.SecretRef != nil:
			key, optional = "Secret "+from.SecretRef.Name, from.SecretRef.Optional
		default:
			continue
		}
		data, ok := sources[key]
		if !ok {
			if optional == nil || !*optional {
				unresolved(from.Prefix+"*", "every key of "+key+", which is not in the manifests")
			}
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		switch v := e.ValueFrom; {
		case v == nil:
			set(e.Name, expand(e.Value, out.Env))
		case v.ConfigMapKeyRef != nil || v.SecretKeyRef != nil:
			key, item, optional := "", "", (*bool)(nil)
			if r := v.ConfigMapKeyRef; r != nil {
				key, item, optional = "ConfigMap "+r.Name, r.Key, r.Optional
			} else {
				r := v.SecretKeyRef
				key, item, optional = "Secret "+r.Name, r.Key, r.Optional
			}
			if value, ok := sources[key][item]; ok {
				set(e.Name, value)
			} else if optional == nil || !*optional {
				unresolved(e.Name, fmt.Sprintf("key %s of %s, which is not in the manifests", item, key))
			}
		case v.FieldRef != nil:
			unresolved(e.Name, "the pod's "+v.FieldRef.FieldPath)
		case v.ResourceFieldRef != nil:
			unresolved(e.Name, "the container's "+v.ResourceFieldRef.Resource)
		default:
			unresolved(e.Name, "a value from elsewhere")
		}
	}
	return out, nil
}

// expand replaces $(NAME) in s by NAME's value in env, and $$ by $; a
// reference to a name env lacks stays as it is, as the kubelet leaves it.
func expand(s string, env []EnvVar) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if k := slices.IndexFunc(env, func(e EnvVar) bool { return e.Name == name }); k >= 0 {
					b.WriteString(env[k].Value)
					i += 2 + end
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
