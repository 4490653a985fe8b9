package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The memory converge shares among its processes is the machine's, or a
// container's limit when that is lower, however the cgroups are mounted.
func TestMemAvailable(t *testing.T) {
	const gib = 1 << 30
	machine := "MemTotal:       16777216 kB\nMemFree:         1000 kB\n" // 16 GiB
	for _, c := range []struct {
		name  string
		files map[string]string
		want  uint64
	}{
		{"no cgroup", map[string]string{"proc/meminfo": machine}, 16 * gib},
		{"nothing known", map[string]string{}, 0},
		{"v2, a parent's limit", map[string]string{
			"proc/meminfo":                      machine,
			"proc/self/cgroup":                  "0::/ci/job-1\n",
			"sys/fs/cgroup/ci/memory.max":       "4294967296\n",
			"sys/fs/cgroup/ci/job-1/memory.max": "max\n",
		}, 4 * gib},
		{"v2, unlimited", map[string]string{
			"proc/meminfo":               "MemTotal: 8388608 kB\n",
			"proc/self/cgroup":           "0::/a\n",
			"sys/fs/cgroup/a/memory.max": "max\n",
		}, 8 * gib},
		{"v2 in a namespace", map[string]string{
			"proc/meminfo":             machine,
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "2147483648\n",
		}, 2 * gib},
		{"v1, hierarchical", map[string]string{
			"proc/meminfo":     machine,
			"proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.stat":           "cache 1\nhierarchical_memory_limit 3221225472\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n",
		}, 3 * gib},
		{"v1, unlimited", map[string]string{
			"proc/meminfo":     machine,
			"proc/self/cgroup": "4:memory:/process_api/x\n",
			"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": "9223372036854771712\n",
		}, 16 * gib},
		{"v1 in a namespace", map[string]string{
			"proc/meminfo":     machine,
			"proc/self/cgroup": "7:cpuset,memory:/kubepods/pod1/c1\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n",
		}, gib},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, data := range c.files {
				p := filepath.Join(root, filepath.FromSlash(name))
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
			}
			assert.Equal(t, c.want, memAvailable(root))
		})
	}
}

// A process's share is a quarter of the memory over the processes side by
// side, and 1 GiB at least, but never more than all of them may have.
func TestMemLimitShares(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		total    uint64
		parallel int
		want     uint64
	}{
		{64 * gib, 2, 8 * gib},
		{8 * gib, 2, gib},         // a quarter shared by two is 1 GiB
		{6 * gib, 4, gib},         // 384 MiB, raised to 1 GiB
		{2 * gib, 2, 2 * gib / 3}, // a 2 GiB container: not 1 GiB each for three
		{0, 2, 0},
	} {
		assert.Equal(t, c.want, share(c.total, c.parallel), "%d bytes, %d processes", c.total, c.parallel)
	}
}
