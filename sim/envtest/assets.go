package envtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// KubernetesVersion is the version hack/assets.sh builds.
const KubernetesVersion = "v1.37.2"

// Binaries the backend runs.
var binaries = []string{"kube-apiserver", "etcd", "kube-controller-manager"}

// DefaultAssetsDir is where `make assets` puts the binaries: under the
// user's cache dir, keyed by version, os and arch, so every clone on the
// machine shares one build.
func DefaultAssetsDir() (string, error) {
	if dir := os.Getenv("CONVERGE_ASSETS_DIR"); dir != "" {
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "converge", "k8s", fmt.Sprintf("%s-%s-%s", KubernetesVersion, runtime.GOOS, runtime.GOARCH)), nil
}

// ErrNoAssets is returned when a binary is missing.
var ErrNoAssets = errors.New("control-plane binaries missing; run `make assets` (hack/assets.sh) to build them")

// FindAssets returns the folder holding every binary: $KUBEBUILDER_ASSETS
// when set, else DefaultAssetsDir. It fails with ErrNoAssets, naming what is
// missing where.
func FindAssets() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		var err error
		if dir, err = DefaultAssetsDir(); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoAssets, err)
		}
	}
	var missing []string
	for _, b := range binaries {
		if info, err := os.Stat(filepath.Join(dir, b)); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%w (%s not in %s)", ErrNoAssets, strings.Join(missing, ", "), dir)
	}
	return dir, nil
}

// Required reports whether a missing control plane must fail tests rather
// than skip them: under CI=true, or CONVERGE_REQUIRE_ENVTEST=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("CONVERGE_REQUIRE_ENVTEST") == "1"
}
