package report

import (
	"errors"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot file names under a report directory (<run> is RunID).
const (
	StartupPlot  = "startup-vs-workers.png"
	MemoryPlot   = "memory-vs-workers.png"
	latencyPlot  = "latency-cdf-%s.png"
	placementFmt = "placements-%s.png"
)

// LatencyPlot is the file name of a run's latency CDFs.
func LatencyPlot(run string) string { return fmt.Sprintf(latencyPlot, run) }

// PlacementPlot is the file name of a run's placements per worker.
func PlacementPlot(run string) string { return fmt.Sprintf(placementFmt, run) }

// WritePlots writes, under dir, per run its latency CDFs per worker
// (dispatch, remote admission, status-sync lag; one line per worker) and
// its placements per worker, and across runs the start-up time and the
// memory against the number of workers. It returns the files written; a
// plot with no data (a run that did not start) is left out.
func WritePlots(dir string, runs []RunReport) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	var errs []error
	add := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("plot %s: %w", name, err))
		} else if name != "" {
			files = append(files, filepath.Join(dir, name))
		}
	}
	for _, rr := range runs {
		if len(rr.Clusters) == 0 {
			continue
		}
		add(LatencyPlot(rr.Run.Run), latencyCDFs(filepath.Join(dir, LatencyPlot(rr.Run.Run)), rr))
		add(PlacementPlot(rr.Run.Run), placements(filepath.Join(dir, PlacementPlot(rr.Run.Run)), rr))
	}
	name, err := startupVsN(filepath.Join(dir, StartupPlot), runs)
	add(name, err)
	name, err = memoryVsN(filepath.Join(dir, MemoryPlot), runs)
	add(name, err)
	return files, errors.Join(errs...)
}

// latencyCDFs draws three CDF panels side by side, one line per worker.
func latencyCDFs(path string, rr RunReport) error {
	type panel struct {
		title string
		get   func(Workload) *float64
	}
	panels := []panel{
		{"dispatch latency (created → remote Admitted)", func(w Workload) *float64 { return w.DispatchLatencyMS }},
		{"remote admission (copy created → Admitted)", func(w Workload) *float64 { return w.RemoteAdmissionMS }},
		{"status-sync lag (remote → manager finished)", func(w Workload) *float64 { return w.StatusSyncLagMS }},
	}
	workers := workerNames(rr)
	row := make([]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s — %s", rr.Run.Run, pn.title)
		p.Title.TextStyle.Font.Size = vg.Points(11)
		p.X.Label.Text = "ms"
		p.Y.Label.Text = "fraction of workloads ≤ x"
		p.Y.Min, p.Y.Max = 0, 1
		p.Add(plotter.NewGrid())
		for wi, w := range workers {
			var vals []float64
			for _, wl := range rr.Workloads {
				if v := pn.get(wl); wl.Phase == PhaseLoad && wl.Cluster == w && v != nil {
					vals = append(vals, *v)
				}
			}
			if len(vals) == 0 {
				continue
			}
			l, err := plotter.NewLine(cdf(vals))
			if err != nil {
				return err
			}
			l.Color, l.Dashes, l.Width = plotutil.Color(wi), plotutil.Dashes(wi/7), vg.Points(1.5)
			p.Add(l)
			if i == 0 {
				p.Legend.Add(fmt.Sprintf("%s (%d)", w, len(vals)), l)
			}
		}
		p.Legend.Top, p.Legend.Left = false, false
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		row[i] = p
	}
	return saveTiles(path, [][]*plot.Plot{row}, 15*vg.Inch, 5*vg.Inch)
}

// cdf is the empirical CDF of vals as a step line.
func cdf(vals []float64) plotter.XYs {
	s := slices.Clone(vals)
	slices.Sort(s)
	xy := make(plotter.XYs, 0, 2*len(s)+1)
	xy = append(xy, plotter.XY{X: s[0], Y: 0})
	for i, v := range s {
		xy = append(xy, plotter.XY{X: v, Y: float64(i) / float64(len(s))}, plotter.XY{X: v, Y: float64(i+1) / float64(len(s))})
	}
	return xy
}

// placements draws a bar per worker.
func placements(path string, rr RunReport) error {
	workers := workerNames(rr)
	var vals plotter.Values
	for _, c := range rr.Clusters {
		if c.Role == "worker" {
			vals = append(vals, float64(c.Placements))
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — load workloads placed per worker (%d jobs)", rr.Run.Run, rr.Run.Jobs)
	p.Y.Label.Text = "workloads"
	p.Add(plotter.NewGrid())
	width := vg.Points(max(6, min(40, 500/float64(len(workers)+1))))
	b, err := plotter.NewBarChart(vals, width)
	if err != nil {
		return err
	}
	b.Color = color.RGBA{R: 70, G: 110, B: 180, A: 255}
	p.Add(b)
	p.NominalX(workers...)
	if len(workers) > 8 {
		p.X.Tick.Label.Rotation = 0.8
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	}
	p.Y.Min = 0
	p.Y.Max = max(1, slices.Max(vals)*1.12)
	p.Title.Padding = vg.Points(6)
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}

// startupVsN draws the start-up time against the number of workers.
func startupVsN(path string, runs []RunReport) (string, error) {
	var xy plotter.XYs
	for _, rr := range runs {
		if rr.Run.StartupSeconds > 0 {
			xy = append(xy, plotter.XY{X: float64(rr.Run.Workers), Y: rr.Run.StartupSeconds})
		}
	}
	if len(xy) == 0 {
		return "", nil
	}
	p := vsN("start-up until every MultiKueueCluster Active", "seconds")
	if err := plotutil.AddLinePoints(p, "1 manager + N workers", sortXY(xy)); err != nil {
		return "", err
	}
	return filepath.Base(path), p.Save(6*vg.Inch, 4*vg.Inch, path)
}

// memoryVsN draws the memory after start and at peak against N.
func memoryVsN(path string, runs []RunReport) (string, error) {
	var after, peak plotter.XYs
	for _, rr := range runs {
		if rr.Run.MemoryAfterStartBytes > 0 {
			after = append(after, plotter.XY{X: float64(rr.Run.Workers), Y: gib(rr.Run.MemoryAfterStartBytes)})
			peak = append(peak, plotter.XY{X: float64(rr.Run.Workers), Y: gib(rr.Run.MemoryPeakBytes)})
		}
	}
	if len(after) == 0 {
		return "", nil
	}
	p := vsN("memory, PSS (test process + its clusters' processes)", "GiB")
	if err := plotutil.AddLinePoints(p, "after start", sortXY(after), "peak during the run", sortXY(peak)); err != nil {
		return "", err
	}
	return filepath.Base(path), p.Save(6*vg.Inch, 4*vg.Inch, path)
}

func vsN(title, unit string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = "workers (N)"
	p.Y.Label.Text = unit
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

func sortXY(xy plotter.XYs) plotter.XYs {
	slices.SortFunc(xy, func(a, b plotter.XY) int {
		if a.X < b.X {
			return -1
		}
		if a.X > b.X {
			return 1
		}
		return 0
	})
	return xy
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }

func workerNames(rr RunReport) []string {
	var out []string
	for _, c := range rr.Clusters {
		if c.Role == "worker" {
			out = append(out, c.Cluster)
		}
	}
	return out
}

// saveTiles draws a grid of plots into one PNG.
func saveTiles(path string, plots [][]*plot.Plot, w, h vg.Length) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))
	dc := draw.New(img)
	t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	canvases := plot.Align(plots, t, dc)
	for j := range plots {
		for i := range plots[j] {
			if plots[j][i] != nil {
				plots[j][i].Draw(canvases[j][i])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
