// Package app turns watcher's settings (package options) into a running
// controller: the hash key, the informers of package store, the lock
// backend, the alert sender, the restart guards' settings, the ReloadPolicy
// watch and status writer, the manager with its servers and health checks
// (in Stakater Reloader's Deployment also the server of Reloader's probes
// and metrics, reloaderServer), and the controller itself
// (controller.Setup). Nothing here decides a restart; it only wires the
// packages that do.
package app
