package main

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// memAvailable is the memory in bytes the processes converge starts may
// use, read under root ("/" but in tests): the machine's (/proc/meminfo's
// MemTotal), or the limit of this process's memory cgroup when it is lower
// (a container's): cgroup v2's memory.max, the lowest on the way up to
// the root; v1's hierarchical_memory_limit, or memory.limit_in_bytes. 0
// where none of them says.
func memAvailable(root string) uint64 {
	total := memTotal(root)
	if l := cgroupLimit(root); l > 0 && (total == 0 || l < total) {
		return l
	}
	return total
}

// memTotal is /proc/meminfo's MemTotal, 0 where it does not say.
func memTotal(root string) uint64 {
	v, _ := field(filepath.Join(root, "proc", "meminfo"), "MemTotal:")
	if f := strings.Fields(v); len(f) == 2 && f[1] == "kB" {
		n, _ := strconv.ParseUint(f[0], 10, 64)
		return n << 10
	}
	return 0
}

// cgroupLimit is the lowest memory limit of this process's cgroups, v1 or
// v2, 0 when there is none.
func cgroupLimit(root string) uint64 {
	data, err := os.ReadFile(filepath.Join(root, "proc", "self", "cgroup"))
	if err != nil {
		return 0
	}
	var lowest uint64
	lower := func(n uint64) {
		if n > 0 && (lowest == 0 || n < lowest) {
			lowest = n
		}
	}
	fs := filepath.Join(root, "sys", "fs", "cgroup")
	for line := range strings.SplitSeq(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		group := path.Clean("/" + parts[2])
		switch {
		case parts[0] == "0" && parts[1] == "":
			// v2: each level's memory.max bounds the levels below it. In
			// a cgroup namespace the path does not exist under the
			// mount, whose root is the group itself.
			for dir := group; ; dir = path.Dir(dir) {
				lower(number(filepath.Join(fs, filepath.FromSlash(dir), "memory.max")))
				if dir == "/" {
					break
				}
			}
		case listHas(parts[1], "memory"):
			dir := filepath.Join(fs, "memory", filepath.FromSlash(group))
			if _, err := os.Stat(dir); err != nil {
				dir = filepath.Join(fs, "memory")
			}
			if v, ok := field(filepath.Join(dir, "memory.stat"), "hierarchical_memory_limit"); ok {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				lower(n)
			} else {
				lower(number(filepath.Join(dir, "memory.limit_in_bytes")))
			}
		}
	}
	return lowest
}

// listHas says whether the comma-separated list holds name.
func listHas(list, name string) bool {
	for v := range strings.SplitSeq(list, ",") {
		if v == name {
			return true
		}
	}
	return false
}

// number is the file's content as a number; 0 when it is not one ("max").
func number(name string) uint64 {
	data, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// field is the rest of the file's first line that starts with key.
func field(name, key string) (string, bool) {
	f, err := os.Open(name)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			return rest, true
		}
	}
	return "", false
}
