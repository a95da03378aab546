package hb

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// The ps calls reach the library and refuse a job without ps tasks
// (TestPSJob runs a real ps job under hbrun --ps).
func TestPSCallsWithoutPSTasks(t *testing.T) {
	c, err := NewContext(WithRank(0), WithWorldSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.NumPS() != 0 {
		t.Fatalf("NumPS %d", c.NumPS())
	}
	cfg := DefaultEmbeddingConfig("on_ps", 4)
	cfg.NumRows, cfg.Placement = 10, PlacementPS
	if _, err := NewEmbedding(c, cfg); err == nil || !strings.Contains(err.Error(), "no ps tasks") {
		t.Fatalf("a ps table without ps tasks: %v", err)
	}
	if _, err := NewPSDense(c, DefaultPSDenseConfig("dense", 4), nil); err == nil ||
		!strings.Contains(err.Error(), "no ps tasks") {
		t.Fatalf("a dense buffer without ps tasks: %v", err)
	}
	if _, err := c.PSStats(); err == nil || err.(*Error).Status != ErrInvalidArgument {
		t.Fatalf("stats without ps tasks: %v", err)
	}
	if _, err := NewPSDense(c, DefaultPSDenseConfig("dense", 4), make([]float32, 3)); err == nil ||
		!strings.Contains(err.Error(), "init: needs 4") {
		t.Fatalf("a short init: %v", err)
	}
	if err := c.Serve(); err == nil || !strings.Contains(err.Error(), "not a ps task") {
		t.Fatalf("a worker served: %v", err)
	}
}

const (
	psSteps, psRows, psDim, psDense = 5, 20, 3, 300
	psLR, psDenseLR                 = float32(0.25), float32(0.5)
)

func psBatch(rank, step int) []int64 {
	ids := make([]int64, 4+rank+step%2)
	for k := range ids {
		ids[k] = int64((rank*7 + step*3 + k*5) % psRows) // duplicates too
	}
	return ids
}

func psGrad(row float32, id int64, rank, step, d int) float32 {
	return row*0.5 + (float32(id)*0.01 + float32(rank) - float32(step)*0.1 + float32(d))
}

func psDenseGrad(rank, step, i int) float32 {
	return 1e-3 * float32(math.Sin(float64(i+7*rank+step)))
}

func psPosition(rank, step int) []byte { return []byte{byte(rank), 0, byte(step), 'p'} }

// TestPSJob runs under hbrun -n 3 --ps 2 (ctest go_ps; three workers, so that
// the rank order of the sums shows): the ps tasks serve;
// the workers train a ps table (SGD, gradients that depend on the rows
// pulled) and a dense buffer at staleness 0, marking positions. The rows
// and every dense pull are bit-equal to a single-process reference of the
// ps's rounds (each id's workers' sums added in rank order, one optimizer
// step per round); PSPosition returns the last position; PSStats counts
// the pushes and no staleness.
func TestPSJob(t *testing.T) {
	if os.Getenv("HB_PS_HOSTS") == "" {
		t.Skip("not launched by hbrun --ps")
	}
	c, err := NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.TaskType() == "ps" {
		if err := c.Serve(); err != nil {
			t.Fatal(err)
		}
		return
	}
	rank, world := c.Rank(), c.WorldSize()
	if pos, step, err := c.PSPosition(); err != nil || pos != nil || step != 0 {
		t.Fatalf("a position before any step: %v %d %v", pos, step, err)
	}

	// The reference: the ps's rounds in one process. float32() around the
	// products keeps Go from fusing them (the ps does not).
	w := make([]float32, psRows*psDim)
	for i := range w {
		w[i] = 0.5
	}
	d := make([]float32, psDense)
	for i := range d {
		d[i] = 0.001 * float32(i)
	}
	init := append([]float32(nil), d...)
	seen := make([][]float32, psSteps)
	for s := 0; s < psSteps; s++ {
		seen[s] = append([]float32(nil), d...)
		total, order := map[int64][]float32{}, []int64{}
		for r := 0; r < world; r++ {
			mine, mineOrder := map[int64][]float32{}, []int64{}
			for _, id := range psBatch(r, s) { // batch order
				g, ok := mine[id]
				if !ok {
					g = make([]float32, psDim)
					mineOrder = append(mineOrder, id)
				}
				for k := 0; k < psDim; k++ {
					v := psGrad(w[int(id)*psDim+k], id, r, s, k)
					if ok {
						g[k] += v
					} else {
						g[k] = v
					}
				}
				mine[id] = g
			}
			for _, id := range mineOrder { // rank order
				if tg, ok := total[id]; ok {
					for k := range tg {
						tg[k] += mine[id][k]
					}
				} else {
					total[id] = mine[id]
					order = append(order, id)
				}
			}
		}
		for _, id := range order {
			for k, g := range total[id] {
				at := int(id)*psDim + k
				w[at] = w[at] - float32(psLR*g)
			}
		}
		for i := range d {
			sum := psDenseGrad(0, s, i)
			for r := 1; r < world; r++ {
				sum += psDenseGrad(r, s, i)
			}
			d[i] = d[i] - float32(psDenseLR*sum)
		}
	}

	cfg := DefaultEmbeddingConfig("go_ps", psDim)
	cfg.NumRows, cfg.Placement = psRows, PlacementPS
	cfg.Initializer, cfg.InitA, cfg.Optimizer, cfg.LearningRate = InitConstant, 0.5, OptSGD, float64(psLR)
	e, err := NewEmbedding(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.LocalRows() != 0 {
		t.Fatalf("a worker holds %d rows of a ps table", e.LocalRows())
	}
	dcfg := DefaultPSDenseConfig("go_dense", psDense)
	dcfg.Optimizer, dcfg.LearningRate = OptSGD, float64(psDenseLR)
	dense, err := NewPSDense(c, dcfg, init)
	if err != nil {
		t.Fatal(err)
	}
	defer dense.Close()
	got := make([]float32, psDense)
	for s := 0; s < psSteps; s++ {
		if err := dense.Pull(got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(seen[s][i]) {
				t.Fatalf("rank %d step %d: dense[%d] %v, reference %v", rank, s, i, got[i], seen[s][i])
			}
		}
		ids := psBatch(rank, s)
		rows := make([]float32, len(ids)*psDim)
		if err := e.Lookup(ids, rows); err != nil {
			t.Fatal(err)
		}
		g := make([]float32, len(rows))
		for k, id := range ids {
			for c := 0; c < psDim; c++ {
				g[k*psDim+c] = psGrad(rows[k*psDim+c], id, rank, s, c)
			}
		}
		if err := c.PSSetPosition(psPosition(rank, s+1)); err != nil {
			t.Fatal(err)
		}
		if err := e.ApplyGradients(ids, g); err != nil {
			t.Fatal(err)
		}
		dg := make([]float32, psDense)
		for i := range dg {
			dg[i] = psDenseGrad(rank, s, i)
		}
		if err := dense.Push(dg); err != nil {
			t.Fatal(err)
		}
	}
	pos, step, err := c.PSPosition()
	if err != nil || !bytes.Equal(pos, psPosition(rank, psSteps)) || step != psSteps {
		t.Fatalf("position %v at step %d: %v", pos, step, err)
	}
	all := make([]int64, psRows)
	for i := range all {
		all[i] = int64(i)
	}
	rows := make([]float32, psRows*psDim)
	if err := e.Lookup(all, rows); err != nil { // after every worker's last round
		t.Fatal(err)
	}
	for i := range rows {
		if math.Float32bits(rows[i]) != math.Float32bits(w[i]) {
			t.Fatalf("rank %d: row value %d %v, reference %v", rank, i, rows[i], w[i])
		}
	}
	if err := dense.Pull(got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(d[i]) {
			t.Fatalf("rank %d: final dense[%d] %v, reference %v", rank, i, got[i], d[i])
		}
	}
	st, err := c.PSStats()
	if err != nil || st.Pushes < int64(2*world*psSteps) || st.Rounds < psSteps || st.MaxStaleness != 0 ||
		st.BoundViolations != 0 || st.RowsPulled == 0 {
		t.Fatalf("stats %+v: %v", st, err)
	}
	if err := dense.Push(make([]float32, 5)); err == nil || !strings.Contains(err.Error(), "grads: needs 300") {
		t.Fatalf("a short gradient: %v", err)
	}
	t.Logf("rank %d: ps table and dense buffer bit-equal to the reference after %d steps; %+v",
		rank, psSteps, st)
	psSplits(t, c, rank)
}

const psSplitSamples = 600 // HB_PS_SPLIT_SAMPLES of ctest go_ps

// psSplits: dynamic splits (HB_PS_SPLIT_* set by ctest): each worker takes
// splits until none is left, pushing -1 per sample with PSSplitCommit before
// the push; after a barrier (every worker's splits table closed: nobody
// waits for another's round) every sample's row is 1 (zeros minus -1), exactly once.
func psSplits(t *testing.T, c *Context, rank int) {
	cfg := DefaultEmbeddingConfig("go_splits", 1)
	cfg.NumRows, cfg.Placement, cfg.Optimizer, cfg.LearningRate = psSplitSamples, PlacementPS, OptSGD, 1
	e, err := NewEmbedding(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for {
		// PSSplitTry (never waits): PSSplitLater while the others hold the
		// rest.
		sp, err := c.PSSplitTry()
		if err != nil {
			t.Fatal(err)
		}
		if sp == nil {
			break
		}
		if sp.Split == PSSplitLater {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if sp.From < sp.Begin || sp.From >= sp.End {
			t.Fatalf("split %+v", *sp)
		}
		for at := sp.From; at < sp.End; {
			end := at + 7
			if end > sp.End {
				end = sp.End
			}
			ids, g := []int64{}, []float32{}
			for j := at; j < end; j++ {
				ids, g = append(ids, j), append(g, -1)
			}
			if err := c.PSSplitCommit(sp.Split, end); err != nil {
				t.Fatal(err)
			}
			if err := e.ApplyGradients(ids, g); err != nil {
				t.Fatal(err)
			}
			taken += len(ids)
			at = end
		}
	}
	if err := c.PSSplitCommit(0, 1); err == nil || !strings.Contains(err.Error(), "not this worker's") {
		t.Fatalf("a commit without a split: %v", err)
	}
	e.Close()
	if err := c.Barrier(20000); err != nil {
		t.Fatal(err)
	}
	if e, err = NewEmbedding(c, cfg); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	all, rows := make([]int64, psSplitSamples), make([]float32, psSplitSamples)
	for i := range all {
		all[i] = int64(i)
	}
	if err := e.Lookup(all, rows); err != nil {
		t.Fatal(err)
	}
	for i, v := range rows {
		if v != 1 {
			t.Fatalf("sample %d: %v", i, v)
		}
	}
	t.Logf("rank %d: took %d of %d samples in dynamic splits; each applied exactly once", rank, taken, psSplitSamples)
}
