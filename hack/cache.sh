# Sourced by the build scripts: sets os and arch (Go's), and cache to the
# same folder as Go's os.UserCacheDir(), where the backends look for what
# the scripts build.
os="$(go env GOOS)"
arch="$(go env GOARCH)"
if [[ -n "${XDG_CACHE_HOME:-}" ]]; then
	cache="$XDG_CACHE_HOME"
elif [[ "$os" == darwin ]]; then
	cache="$HOME/Library/Caches"
else
	cache="$HOME/.cache"
fi
