package scenarios

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// nowMark in a string of an object's manifest or of an interference's
// value stands for an instant relative to when the harness writes it:
// "{{now}}", "{{now+5s}}", "{{now-1h30m}}" (a Go duration). The
// scenario's objects are written at the run's start; an interference at
// its step. It becomes that instant in RFC 3339, UTC, to the second, as
// the API server writes times (metav1.Time): so a manifest can say "five
// seconds from now" whatever the clock, virtual or real, reads.
var nowMark = regexp.MustCompile(`\{\{\s*now\s*(?:([+-])\s*([^{}]*?)\s*)?\}\}`)

// maxNowOffset bounds an offset: a century either way.
const maxNowOffset = 100 * 365 * 24 * time.Hour

// nowOffset is the offset a match of nowMark (its submatches) writes.
func nowOffset(m []string) (time.Duration, error) {
	if m[1] == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(m[2])
	if err != nil {
		return 0, fmt.Errorf("%s: the offset must be a duration such as 5s or 1h30m: %w", m[0], err)
	}
	if d < 0 || d > maxNowOffset {
		return 0, fmt.Errorf("%s: the offset must be within 0..%v, with + or - before it", m[0], maxNowOffset)
	}
	if m[1] == "-" {
		d = -d
	}
	return d, nil
}

// checkNow lists the malformed nowMarks in v's strings, each with its
// path from path.
func checkNow(v any, path string) []string {
	var out []string
	walkStrings(v, path, func(p, s string) {
		if !strings.Contains(s, "{{") {
			return
		}
		for _, m := range nowMark.FindAllStringSubmatch(s, -1) {
			if _, err := nowOffset(m); err != nil {
				out = append(out, fmt.Sprintf("%s: %v", p, err))
			}
		}
	})
	return out
}

func walkStrings(v any, path string, f func(path, s string)) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			walkStrings(e, join(k), f)
		}
	case []any:
		for i, e := range x {
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), f)
		}
	case string:
		f(path, x)
	}
}

// withNow copies v with every nowMark replaced by the instant it stands
// for, now being when the value is written. A malformed mark (refused at
// load) is left as it is.
func withNow(v any, now time.Time) any {
	return mapStrings(v, func(s string) string {
		if !strings.Contains(s, "{{") {
			return s
		}
		return nowMark.ReplaceAllStringFunc(s, func(mark string) string {
			d, err := nowOffset(nowMark.FindStringSubmatch(mark))
			if err != nil {
				return mark
			}
			return now.Add(d).UTC().Truncate(time.Second).Format(time.RFC3339)
		})
	}, false)
}
