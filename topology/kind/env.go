package kind

import (
	"fmt"
	"strconv"
	"strings"
)

// Environment variables that OptionsFromEnv reads (the bundled examples
// honour them with MKTK_PROVIDER=kind).
const (
	// EnvKeep, when true ("1", "true"), sets Options.Keep: the clusters stay
	// for the next run to reuse.
	EnvKeep = "MKTK_KIND_KEEP"
	// EnvNodeImage sets Options.NodeImage.
	EnvNodeImage = "MKTK_KIND_NODE_IMAGE"
)

// OptionsFromEnv reads Options from EnvKeep and EnvNodeImage with getenv
// (os.Getenv). Unset variables leave the defaults; a value that does not
// parse is an error naming the variable.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	var o Options
	if v := strings.TrimSpace(getenv(EnvKeep)); v != "" {
		keep, err := strconv.ParseBool(v)
		if err != nil {
			return Options{}, fmt.Errorf("kind: %s=%q: want true or false", EnvKeep, v)
		}
		o.Keep = keep
	}
	o.NodeImage = strings.TrimSpace(getenv(EnvNodeImage))
	if _, err := o.withDefaults(); err != nil {
		return Options{}, fmt.Errorf("%w (from $%s)", err, EnvNodeImage)
	}
	return o, nil
}
