// Package app turns watcher's settings (package options) into a running
// controller: the hash key, the informers of package store, the lock
// backend, the alert sender, the restart guards' settings, the ReloadPolicy
// watch and status writer, the manager with its servers and health checks
// (in Stakater Reloader's Deployment also the server of Reloader's probes
// and metrics, reloaderServer), the controller itself (controller.New,
// registered by controller.Setup), and what runs beside it: the
// reconciler's helpers (Reconciler.Helpers, run by helpers), the follower
// of the optional APIs (served.Kinds) with the SealedSecrets watch and who
// claims its changes (claimer). Nothing here decides a restart; it only wires the
// packages that do.
package app
