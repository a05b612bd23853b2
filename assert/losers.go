package assert

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// GateWaitForWorkloadAdmitted is the Kueue feature gate that decides when
// MultiKueue deletes the losing copies: after the winner is Admitted (on, the
// v0.17.0 default) or after it reserved quota (off).
const GateWaitForWorkloadAdmitted = "MultiKueueWaitForWorkloadAdmitted"

// waitForAdmitted reports the gate as configured for the topology.
func (c *Checker) waitForAdmitted() bool {
	if v, ok := c.Topo.Spec.Kueue.FeatureGates[GateWaitForWorkloadAdmitted]; ok {
		return v
	}
	return true
}

// waitForAdmittedSaid writes the gate and the value judged by, marked
// unknown when the cluster's gates were not read and the gate not given.
func (c *Checker) waitForAdmittedSaid() string {
	s := fmt.Sprintf("%s=%t", GateWaitForWorkloadAdmitted, c.waitForAdmitted())
	if _, given := c.Topo.Spec.Kueue.FeatureGates[GateWaitForWorkloadAdmitted]; !given {
		if why, ok := c.Topo.Facts.Assumed[topology.FactFeatureGates]; ok {
			s += " (unknown: " + why + ")"
		}
	}
	return s
}

// LosersCleaned checks that in each admission cycle the copies of the
// workload on the workers that were not selected are deleted, and not too
// early: with MultiKueueWaitForWorkloadAdmitted on (the default) no loser is
// deleted before the winner's copy is Admitted; with it off, not before the
// winner's copy reserved quota. It waits (as long as the topology
// progresses; see Checker.Timeout) for the deletions.
//
// It does not check the winner's copy (ExactlyOnceAdmitted does) nor the
// cleanup after the workload finished (NoOrphans does).
func (c *Checker) LosersCleaned(ctx context.Context, job client.Object) error {
	if ok, err := c.perGroup(ctx, "LosersCleaned", job, c.LosersCleaned); ok {
		return err
	}
	t, err := c.resolveFor(ctx, "LosersCleaned", job)
	if err != nil {
		return err
	}
	waitErr := pollHistory(ctx, c, t, fmt.Sprintf("the losing copies of %s to be deleted", t), func() error {
		wl, jobs := c.history(t)
		cycles, _ := placements(wl, jobs, c.Topo.Manager.Name)
		if len(cycles) == 0 {
			if err := neverPlaced(wl, c.Topo.Manager.Name, t); err != nil {
				return err
			}
			return fmt.Errorf("%s has no clusterName yet", t)
		}
		if kept := c.keptLosers(wl, cycles[len(cycles)-1]); len(kept) > 0 {
			return fmt.Errorf("copies still on %v", kept)
		}
		return nil
	})
	wl, jobs := c.history(t)
	cycles, problems := placements(wl, jobs, c.Topo.Manager.Name)
	t0 := firstTime(wl, jobs)
	mark, markName := observe.Admitted, "Admitted"
	if !c.waitForAdmitted() {
		mark, markName = observe.QuotaReserved, "QuotaReserved"
	}
	var lower time.Time
	for i, cy := range cycles {
		var winnerMark time.Time
		for _, e := range wl {
			if e.Cluster == cy.cluster && e.Type == mark && e.Time.After(lower) && !e.Time.After(cy.start.Add(c.skew())) {
				winnerMark = e.Time
			}
		}
		for _, e := range wl {
			if e.Cluster == c.Topo.Manager.Name || e.Cluster == cy.cluster || e.Type != observe.Deleted {
				continue
			}
			if e.Time.After(lower) && !e.Time.After(cy.start.Add(c.skew())) && (winnerMark.IsZero() || e.Time.Before(winnerMark.Add(-c.skew()))) {
				when := "before the winner's copy on " + fmt.Sprintf("%q", cy.cluster) + " was " + markName
				if !winnerMark.IsZero() {
					when += " at " + rel(winnerMark, t0)
				}
				problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: its copy was deleted at %s, %s (%s)",
					e.Cluster, i+1, rel(e.Time, t0), when, c.waitForAdmittedSaid()))
			}
		}
		for _, x := range c.keptLosers(wl, cy) {
			if cy.inferred {
				problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: its copy of %s was kept after MultiKueue had placed it on %q (remote job created at %s) without the manager ever recording that placement (no status.clusterName): %s",
					x, i+1, t, cy.cluster, rel(cy.start, t0), RedoneDispatch))
				continue
			}
			problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: its copy of %s was kept after %q was selected at %s", x, i+1, t, cy.cluster, rel(cy.start, t0)))
		}
		lower = cy.end
		if lower.IsZero() {
			lower = cy.start
		}
	}
	if waitErr != nil && len(problems) == 0 {
		problems = append(problems, c.waited(ctx, t, waitErr)...)
	}
	if len(problems) == 0 {
		return nil
	}
	return c.fail(ctx, &Failure{
		Assertion: "LosersCleaned",
		Object:    t.String(),
		Expected:  fmt.Sprintf("every non-selected worker's copy deleted, none before the winner's copy was %s (%s)", markName, c.waitForAdmittedSaid()),
		Problems:  problems,
		Timeline:  c.timeline(wl, jobs),
	}, t.refs(c)...)
}

// keptLosers returns the workers other than the cycle's whose copy existed
// after the cycle started (plus skew) and was not deleted before its end.
func (c *Checker) keptLosers(wl []observe.Event, cy cycle) []string {
	var out []string
	for _, w := range c.Topo.Workers {
		if w.Name == cy.cluster {
			continue
		}
		exists := false
		for _, e := range wl {
			if e.Cluster != w.Name || (!cy.end.IsZero() && !e.Time.Before(cy.end)) {
				continue
			}
			switch e.Type {
			case observe.Created:
				exists = true
			case observe.Deleted:
				exists = false
			}
		}
		if exists {
			out = append(out, w.Name)
		}
	}
	return out
}
