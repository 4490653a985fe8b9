// Generates the clientset, listers, informers and deepcopy functions of the
// examples' API types. Separate from the project's module so its go.mod
// stays small; see hack/codegen/update.sh.
module github.com/converge-lab/converge/hack/codegen

go 1.26.8

require k8s.io/code-generator v0.35.0

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	golang.org/x/mod v0.37.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	golang.org/x/tools v0.47.0 // indirect
	k8s.io/gengo/v2 v2.0.0-20260408192533-25e2208e0dc3 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
)
