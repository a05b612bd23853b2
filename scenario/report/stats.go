package report

import (
	"math"
	"slices"
	"time"
)

// DistOf returns the distribution of ms (milliseconds): nearest-rank
// percentiles, max and mean.
func DistOf(ms []float64) Dist {
	if len(ms) == 0 {
		return Dist{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Dist{Count: len(s), P50: rank(s, 50), P90: rank(s, 90), P99: rank(s, 99), Max: s[len(s)-1], Mean: round3(sum / float64(len(s)))}
}

// rank is the nearest-rank p-th percentile of sorted s.
func rank(s []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func msPtr(d time.Duration) *float64 { v := ms(d); return &v }
