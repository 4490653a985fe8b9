package controller

// PolicyInput is what the scaling policy decides on.
type PolicyInput struct {
	// Desired is the Deployment's spec.replicas (nil already mapped to 1).
	Desired int32
	// Ready is the number of matching pods that are ready and not terminating.
	Ready int32
	// Max is the Deployment's ceiling.
	Max int32
}

// Decision is the outcome of the policy.
type Decision struct {
	// Scale is true when the Deployment should be scaled to Target.
	Scale bool
	// Target is the new spec.replicas when Scale is true.
	Target int32
	// Reason says, in a word, why the policy decided what it did.
	Reason string
}

// Reasons a Decision gives.
const (
	ReasonUnderReady   = "UnderReady"
	ReasonEnoughReady  = "EnoughReady"
	ReasonAtMax        = "AtMax"
	ReasonScaledToZero = "ScaledToZero"
)

// Decide is the scaler's policy: when ready pods are fewer than half the
// desired replicas, in exact arithmetic (2*ready < desired), scale to
// min(desired*2, max). It never scales down, never touches a Deployment
// already at or above its max, and leaves one scaled to zero alone.
func Decide(in PolicyInput) Decision {
	switch {
	case in.Desired <= 0:
		return Decision{Reason: ReasonScaledToZero}
	case in.Desired >= in.Max:
		return Decision{Reason: ReasonAtMax}
	case 2*int64(in.Ready) >= int64(in.Desired):
		return Decision{Reason: ReasonEnoughReady}
	}
	target := min(2*int64(in.Desired), int64(in.Max))
	return Decision{Scale: true, Target: int32(target), Reason: ReasonUnderReady}
}
