package tmpprof

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/converge-lab/converge/scenarios/explore"
)

func BenchmarkReport(b *testing.B) {
	raw, err := os.ReadFile("/tmp/ab-out/exploration.json")
	if err != nil {
		b.Fatal(err)
	}
	var e explore.Exploration
	if err := json.Unmarshal(raw, &e); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := explore.WriteReport("/tmp/ab-out", &e); err != nil {
			b.Fatal(err)
		}
	}
}
