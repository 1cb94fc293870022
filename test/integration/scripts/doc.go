// Package scripts tests the shell scripts of hack/ that the build and the
// tests run: two runs at once of a script that builds into the cache
// (controlplane-bins.sh, helm.sh) build each thing once, under the lock of
// cachelock.sh. It runs the scripts with bash and a stub go command. It has
// no code of its own.
package scripts
