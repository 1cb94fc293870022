package alert

import "time"

// Limit is the rate limit of alerts per namespace: a token bucket of Burst
// alerts, refilled by one every Every.
type Limit struct {
	// Burst is how many alerts a namespace may send at once; 0: 5.
	Burst int
	// Every is how often a namespace gets one more; 0: 20s (3 a minute).
	Every time.Duration
	// MaxNamespaces bounds the buckets kept per class; 0: 1024.
	MaxNamespaces int
}

// withDefaults returns l with its zero fields set to the defaults.
func (l Limit) withDefaults() Limit {
	if l.Burst <= 0 {
		l.Burst = 5
	}
	if l.Every <= 0 {
		l.Every = 20 * time.Second
	}
	if l.MaxNamespaces <= 0 {
		l.MaxNamespaces = 1024
	}
	return l
}

// bucket is the token bucket of one namespace and class.
type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
	dry    bool      // the last alert was refused
}

// limiter keeps one bucket per namespace for each class of alerts: failed
// rollouts, and everything else. A namespace's flood of held or flapping
// alerts so never takes the tokens of its failed rollouts, and no
// namespace takes another's. It is not safe for concurrent use.
//
//	namespace's bucket of the class              allow
//	unknown, fewer than MaxNamespaces kept       yes: a new bucket, Burst-1 left
//	unknown, MaxNamespaces kept                  the buckets full again are
//	                                             forgotten first; yes if one was,
//	                                             else no
//	a token left (after refilling 1 per Every)   yes, one token taken
//	none left                                    no
type limiter struct {
	limit   Limit
	buckets [2]map[string]*bucket
}

func newLimiter(l Limit) *limiter {
	return &limiter{limit: l.withDefaults(), buckets: [2]map[string]*bucket{{}, {}}}
}

// class returns the index of a's class: 1 for failed rollouts, else 0.
func class(a Alert) int {
	if a.Event == FailedRollout {
		return 1
	}
	return 0
}

// namespaceOf returns the namespace an alert is about: its workload's, else
// its first source's, else "" (none).
func namespaceOf(a Alert) string {
	if a.Workload != nil {
		return a.Workload.Namespace
	}
	if len(a.Sources) > 0 {
		return a.Sources[0].Namespace
	}
	return ""
}

// allow tells whether a may be sent at now, and takes its token; newlyDry
// is true when a is the first refused since its bucket last allowed one
// (worth one log line).
func (l *limiter) allow(a Alert, now time.Time) (ok, newlyDry bool) {
	m := l.buckets[class(a)]
	ns := namespaceOf(a)
	b := m[ns]
	if b == nil {
		if len(m) >= l.limit.MaxNamespaces {
			l.prune(m, now)
		}
		if len(m) >= l.limit.MaxNamespaces {
			return false, false
		}
		b = &bucket{tokens: float64(l.limit.Burst), at: now}
		m[ns] = b
	}
	l.refill(b, now)
	if b.tokens < 1 {
		newlyDry = !b.dry
		b.dry = true
		return false, newlyDry
	}
	b.tokens--
	b.dry = false
	return true, false
}

// refill brings b's tokens up to now.
func (l *limiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(l.limit.Burst), b.tokens+float64(d)/float64(l.limit.Every))
		b.at = now
	}
}

// prune forgets the buckets of m that are full again at now: a new bucket
// would be the same.
func (l *limiter) prune(m map[string]*bucket, now time.Time) {
	for ns, b := range m {
		l.refill(b, now)
		if b.tokens >= float64(l.limit.Burst) {
			delete(m, ns)
		}
	}
}
