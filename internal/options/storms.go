package options

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The values of --on-failed-rollout.
const (
	OnFailedHold     = "hold"
	OnFailedContinue = "continue"
)

// Rate is a count per period, such as 5 restarts per hour.
type Rate struct {
	Count int
	Per   time.Duration
}

// Off reports whether the limit is turned off (a zero count).
func (r Rate) Off() bool { return r.Count == 0 }

// String writes r as it is read: "5/1h0m0s", or "0".
func (r Rate) String() string {
	if r.Off() {
		return "0"
	}
	return strconv.Itoa(r.Count) + "/" + r.Per.String()
}

// rate is a Rate flag: "COUNT/DURATION" (5/1h, 2/20s), or 0 for off.
type rate struct{ r *Rate }

func (r rate) String() string { return r.r.String() }
func (r rate) Type() string   { return "count/duration" }
func (r rate) Set(v string) error {
	v = strings.TrimSpace(v)
	if v == "0" {
		*r.r = Rate{}
		return nil
	}
	n, per, ok := strings.Cut(v, "/")
	count, err := strconv.Atoi(n)
	d, derr := time.ParseDuration(per)
	if !ok || err != nil || derr != nil || count < 1 || count > 1000000 || d <= 0 {
		return fmt.Errorf(`want a count and a duration such as "5/1h" or "2/20s" (count from 1 to 1000000, duration above 0), or "0" to turn it off`)
	}
	*r.r = Rate{Count: count, Per: d}
	return nil
}

// validateStorms checks the settings of the restart guards.
func (o *Options) validateStorms() []error {
	var p problems
	if !o.FlapThreshold.Off() && o.FlapQuiet <= 0 {
		p.add("flap-quiet", "FLAP_QUIET", "want a duration greater than 0, such as 2m, while --flap-threshold is on")
	}
	if o.ProducerTimeout < 0 {
		p.add("producer-timeout", "PRODUCER_TIMEOUT", "want a duration of 0 or more, such as 10m")
	}
	if o.RolloutTimeout <= 0 {
		p.add("rollout-timeout", "ROLLOUT_TIMEOUT", "want a duration greater than 0, such as 10m")
	}
	return p
}
