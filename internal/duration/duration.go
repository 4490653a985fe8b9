// Package duration is how converge writes a duration in every file it
// reads and writes (scenario files, fault specs, results): a Go duration
// string, "1m30s". A bare number is refused, since nothing says its unit.
package duration

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written as "1m30s".
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"1m30s\", got %s", truncate(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// truncate is b, cut to 40 bytes for an error message.
func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
