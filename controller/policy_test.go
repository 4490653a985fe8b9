package controller_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-lab/converge/controller"
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name    string
		in      controller.PolicyInput
		want    bool
		target  int32
		because string
	}{
		{"half unready scales", controller.PolicyInput{Desired: 4, Ready: 1, Max: 10}, true, 8, controller.ReasonUnderReady},
		{"exactly half ready is enough", controller.PolicyInput{Desired: 4, Ready: 2, Max: 10}, false, 0, controller.ReasonEnoughReady},
		{"odd desired uses exact arithmetic", controller.PolicyInput{Desired: 3, Ready: 1, Max: 10}, true, 6, controller.ReasonUnderReady},
		{"odd desired with enough ready", controller.PolicyInput{Desired: 3, Ready: 2, Max: 10}, false, 0, controller.ReasonEnoughReady},
		{"one replica none ready", controller.PolicyInput{Desired: 1, Ready: 0, Max: 10}, true, 2, controller.ReasonUnderReady},
		{"one replica ready", controller.PolicyInput{Desired: 1, Ready: 1, Max: 10}, false, 0, controller.ReasonEnoughReady},
		{"capped at max", controller.PolicyInput{Desired: 6, Ready: 0, Max: 10}, true, 10, controller.ReasonUnderReady},
		{"at max untouched", controller.PolicyInput{Desired: 10, Ready: 0, Max: 10}, false, 0, controller.ReasonAtMax},
		{"above max never scaled down", controller.PolicyInput{Desired: 12, Ready: 0, Max: 10}, false, 0, controller.ReasonAtMax},
		{"scaled to zero by owner", controller.PolicyInput{Desired: 0, Ready: 0, Max: 10}, false, 0, controller.ReasonScaledToZero},
		{"more ready than desired", controller.PolicyInput{Desired: 2, Ready: 5, Max: 10}, false, 0, controller.ReasonEnoughReady},
		{"max of one", controller.PolicyInput{Desired: 1, Ready: 0, Max: 1}, false, 0, controller.ReasonAtMax},
		{"no int32 overflow", controller.PolicyInput{Desired: math.MaxInt32 - 1, Ready: 0, Max: math.MaxInt32}, true, math.MaxInt32, controller.ReasonUnderReady},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := controller.Decide(tt.in)
			assert.Equal(t, tt.want, got.Scale)
			assert.Equal(t, tt.target, got.Target)
			assert.Equal(t, tt.because, got.Reason)
			if got.Scale {
				assert.Greater(t, got.Target, tt.in.Desired, "never scales down")
				assert.LessOrEqual(t, got.Target, tt.in.Max, "never above max")
			}
		})
	}
}
