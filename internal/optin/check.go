package optin

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/watcher-dev/watcher/internal/pin"
)

// Check returns an error for each annotation among ann that is malformed:
// a boolean that is not one, a list over the limits, a list entry that
// does not compile; those of the pod template that Effective kept are
// named "pod template annotation". Values of booleans are not quoted (on a
// Secret they could be anything); list entries are, cut short, at most
// maxQuoted of them, as they are on workloads and name objects.
func Check(ann map[string]string) error {
	var errs []error
	for _, src := range []struct{ prefix, what string }{{"", "annotation"}, {fromTemplate, "pod template annotation"}} {
		for _, key := range []string{Auto, ReloaderAuto, ConfigMapAuto, SecretAuto, SecretProviderClassAuto} {
			if v, ok := ann[src.prefix+key]; ok {
				if _, err := strconv.ParseBool(v); err != nil {
					errs = append(errs, fmt.Errorf("%s %s is neither true nor false; ignoring it", src.what, key))
				}
			}
		}
		for _, key := range []string{Ignore, Search, Match} {
			if v, ok := ann[src.prefix+key]; ok && v != "true" && v != "false" {
				errs = append(errs, fmt.Errorf("%s %s is neither \"true\" nor \"false\" (compared exactly, as Reloader does); reading it as false", src.what, key))
			}
		}
		for _, key := range []string{ConfigMapReload, SecretReload, SecretProviderClassReload} {
			if v, ok := ann[src.prefix+key]; ok {
				errs = append(errs, checkList(src.what+" "+key, parse(v))...)
			}
		}
	}
	for _, key := range []string{ConfigMapExclude, SecretExclude, SecretProviderClassExclude} {
		if v, ok := ann[key]; ok {
			if err := precheck(v); err != nil {
				errs = append(errs, fmt.Errorf("annotation %s %w; ignoring the whole list", key, err))
			}
		}
	}
	if _, err := PausePeriodOf(ann); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := SettleOf(ann); err != nil {
		errs = append(errs, err)
	}
	if _, err := RefreshSiblingsOf(ann); err != nil {
		errs = append(errs, err)
	}
	if v, ok := ann[pin.Annotation]; ok && v != "true" && v != "false" {
		errs = append(errs, fmt.Errorf("annotation %s is neither \"true\" nor \"false\"; not pinning", pin.Annotation))
	}
	return errors.Join(errs...)
}

// maxQuoted is the most invalid entries of one list an error quotes.
const maxQuoted = 3

// checkList returns the errors of the parsed list l, read from the
// annotation called name.
func checkList(name string, l *parsedList) []error {
	if l.refused != nil {
		return []error{fmt.Errorf("%s %w; ignoring the whole list", name, l.refused)}
	}
	var errs []error
	for i, bad := range l.invalid {
		if i == maxQuoted {
			errs = append(errs, fmt.Errorf("%s: %d more entries are not regular expressions; ignoring them", name, len(l.invalid)-i))
			break
		}
		errs = append(errs, fmt.Errorf("%s: entry %s is not a regular expression; ignoring it", name, quoteShort(bad)))
	}
	return errs
}
