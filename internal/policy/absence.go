package policy

import "time"

// DefaultConfirm is how long the ReloadPolicy CRD must be seen not served
// before the policies are switched off: a lease duration, so that an API
// server restart or a discovery hiccup is over before anything changes.
const DefaultConfirm = 15 * time.Second

// answer is one answer of the discovery API, with the state it finds.
type answer struct {
	// served: the CRD is served; known: the call answered (a failed call
	// tells nothing).
	served, known bool
	// on: the policy informers run.
	on  bool
	now time.Time
}

// absence is what the answers since the CRD was last seen served say.
type absence struct {
	// since is the time of the first answer without the CRD; zero: the
	// last answer had it (or the informers are stopped).
	since time.Time
	// answers counts the answers without the CRD since then.
	answers int
}

// action is what Watcher does after an answer.
type action int

const (
	actKeep  action = iota // nothing changes
	actStart               // start the informers: policies on
	actWait                // the CRD is not served: keep the policies until that is confirmed
	actStop                // absence confirmed: stop the informers, forget and release every policy
)

// next decides what an answer a does, given the absence seen so far, and
// returns the absence to remember:
//
//	answer      informers  absence so far                 action
//	unknown     any        any                            keep (absence as it was)
//	served      stopped    any                            start (absence forgotten)
//	served      running    any                            keep (absence forgotten)
//	not served  stopped    any                            keep (policies are off)
//	not served  running    none: this is the first        wait (absence starts now)
//	not served  running    for less than confirm, or      wait
//	                       only one answer before
//	not served  running    for confirm or more, and this  stop (absence forgotten)
//	                       is the second answer at least
func next(a answer, abs absence, confirm time.Duration) (action, absence) {
	switch {
	case !a.known:
		return actKeep, abs
	case a.served && !a.on:
		return actStart, absence{}
	case a.served:
		return actKeep, absence{}
	case !a.on:
		return actKeep, absence{}
	}
	if abs.answers == 0 {
		return actWait, absence{since: a.now, answers: 1}
	}
	abs.answers++
	if a.now.Sub(abs.since) < confirm {
		return actWait, abs
	}
	return actStop, absence{}
}
