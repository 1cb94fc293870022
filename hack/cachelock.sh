# cachelock.sh is sourced by the scripts that build or download into the
# cache (controlplane-bins.sh, helm.sh, argo-rollouts.sh, sealed-secrets.sh,
# crds.sh). Two of them run at once when two make commands start together
# on a fresh machine: each would find the cache empty and write the same
# files at the same time. cache_lock makes the second wait for the first,
# then find what it built.

# cache_lock <folder> creates the folder (a version folder of the cache)
# and holds an exclusive lock on it until the script exits. Without flock
# (util-linux; not on macOS unless installed) it locks nothing.
cache_lock() {
	mkdir -p "$1"
	command -v flock >/dev/null 2>&1 || return 0
	exec 9>"$1/.lock"
	if ! flock -n 9; then
		printf '%s: waiting for another run building into %s\n' "$(basename "$0" .sh)" "$1" >&2
		flock 9
	fi
}
