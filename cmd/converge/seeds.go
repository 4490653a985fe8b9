package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxSeeds bounds the runs one --seeds asks for.
const maxSeeds = 10_000

// seedList parses --seeds: "7" is seed 7, "1-20" the seeds 1 to 20, and
// "3,9,12" those three. Repeats are run once.
func seedList(s string) ([]uint64, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) error {
		return fmt.Errorf("--seeds %q: %s (want a seed 7, a range 1-20 or a list 3,9,12)", s, why)
	}
	seed := func(p string) (uint64, error) {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return 0, bad(fmt.Sprintf("%q is not a whole number within 0..%d", strings.TrimSpace(p), uint64(math.MaxUint64)))
		}
		return n, nil
	}
	var out []uint64
	seen := map[uint64]bool{}
	add := func(n uint64) error {
		if seen[n] {
			return nil
		}
		if len(out) == maxSeeds {
			return bad(fmt.Sprintf("more than %d seeds", maxSeeds))
		}
		seen[n] = true
		out = append(out, n)
		return nil
	}
	switch {
	case s == "":
		return nil, bad("empty")
	case strings.Contains(s, ","):
		for _, p := range strings.Split(s, ",") {
			if strings.TrimSpace(p) == "" {
				continue
			}
			n, err := seed(p)
			if err != nil {
				return nil, err
			}
			if err := add(n); err != nil {
				return nil, err
			}
		}
		if len(out) == 0 {
			return nil, bad("no seed")
		}
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		lo, err := seed(a)
		if err != nil {
			return nil, err
		}
		hi, err := seed(b)
		if err != nil {
			return nil, err
		}
		if hi < lo {
			return nil, bad("the range ends before it starts")
		}
		if hi-lo >= maxSeeds {
			return nil, bad(fmt.Sprintf("more than %d seeds", maxSeeds))
		}
		// Counted, not compared against hi: hi may be the largest uint64.
		for i := uint64(0); i <= hi-lo; i++ {
			out = append(out, lo+i)
		}
	default:
		n, err := seed(s)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
