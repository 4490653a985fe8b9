package expect

import (
	"testing"

	"github.com/stretchr/testify/require"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// deploymentJSON is a Deployment as a controller sees it mid-rollout.
const deploymentJSON = `{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {
    "name": "web",
    "namespace": "shop",
    "uid": "5b1c4d0e-2f0a-4c61-9a55-0d3b7f0b8c11",
    "resourceVersion": "48213",
    "generation": 7,
    "creationTimestamp": "2026-01-05T10:00:00Z",
    "labels": {"app": "web", "tier": "frontend"},
    "annotations": {
      "converge.dev/max-replicas": "5",
      "deployment.kubernetes.io/revision": "3"
    }
  },
  "spec": {
    "replicas": 3,
    "selector": {"matchLabels": {"app": "web"}},
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
    "template": {
      "metadata": {"labels": {"app": "web"}},
      "spec": {
        "containers": [
          {
            "name": "web",
            "image": "registry.example/web:1.4.2",
            "ports": [{"containerPort": 8080, "protocol": "TCP"}, {"containerPort": 9090, "name": "metrics", "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            "env": [{"name": "MODE", "value": "prod"}, {"name": "WORKERS", "value": "4"}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5}
          },
          {
            "name": "proxy",
            "image": "registry.example/proxy:2.0",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}
          }
        ],
        "terminationGracePeriodSeconds": 30
      }
    }
  },
  "status": {
    "observedGeneration": 7,
    "replicas": 3,
    "updatedReplicas": 3,
    "readyReplicas": 3,
    "availableReplicas": 3,
    "conditions": [
      {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastUpdateTime": "2026-01-05T10:01:00Z"},
      {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "lastUpdateTime": "2026-01-05T10:01:00Z"}
    ]
  }
}`

// decode decodes JSON as the API machinery does: ints become int64.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, utiljson.Unmarshal([]byte(s), &m))
	return m
}

func deployment(t testing.TB) map[string]any { return decode(t, deploymentJSON) }
