package hb

import "hb.dev/hb/internal/capi"

// Parameter-server mode (EXPERIMENTAL; docs/parameter-servers.md): a ps task
// calls Context.Serve; workers place tables on the ps tasks
// (EmbeddingConfig.Placement = PlacementPS) and dense buffers (PSDense), and
// mark reader positions with Context.PSSetPosition.

// Table placements (hb.h's hb_placement_code).
const (
	PlacementWorkers int32 = 0 // sharded over the ranks (collective mode)
	PlacementPS      int32 = 1 // on the job's ps tasks
)

// NumPS is the number of ps tasks of the job (0: collective mode).
func (c *Context) NumPS() int { return int(capi.Context_num_ps(c.raw())) }

// Serve serves the workers' ps tables and dense buffers on a ps task
// (TaskType() is "ps") until every worker has left. ErrPeerFailed: workers
// were lost and none came back; ErrTimeout: none came; ErrInvalidArgument
// on a worker.
func (c *Context) Serve() error { return capi.Context_serve(c.raw()) }

// PSSetPosition sets the reader position (at most 64 KiB) that this worker's
// next pushes carry; each ps task commits it with the push's gradients,
// atomically.
func (c *Context) PSSetPosition(position []byte) error {
	return capi.Ps_set_position(c.raw(), ptr(position), int64(len(position)))
}

// PSPosition returns, after a restart (and after creating the ps tables),
// the position this worker committed with its last step applied everywhere
// and that step count; nil and 0 when it committed nothing. The tables
// resume at that step.
func (c *Context) PSPosition() ([]byte, int64, error) {
	var blob string
	var step int64
	if err := capi.Hb_ps_position(c.raw(), &blob, &step); err != nil {
		return nil, 0, err
	}
	if step == 0 {
		return nil, 0, nil
	}
	return []byte(blob), step, nil
}

// PSStats are the ps tasks' counters (hb_ps_stats; summed, MaxStaleness the
// largest).
type PSStats struct {
	Pulls, Pushes          int64 // requests, per table and ps task
	RowsPulled, RowsPushed int64
	Rounds                 int64 // staleness 0: optimizer rounds
	MaxStaleness           int64 // largest lead of a pushing worker over the slowest live one
	BoundViolations        int64 // pushes past the bound (always 0)
	DuplicatePushes        int64 // replayed steps dropped
	WorkersLost            int64
	WorkersRejoined        int64
	BusyMicros             int64 // time the ps tasks spent serving
	WorkersLeft            int64 // workers that have left every ps task
	WorkersGone            int64 // workers that have left or are lost on every ps task, now
}

// PSStats returns the ps tasks' counters.
func (c *Context) PSStats() (PSStats, error) {
	s := make([]int64, 13)
	if err := capi.Hb_ps_get_stats(c.raw(), ptr(s)); err != nil {
		return PSStats{}, err
	}
	return PSStats{s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12]}, nil
}

// PSSplit is a split of the job's input handed out by ps task 0
// (hb_ps_split): samples (or reader bytes) [Begin, End), to be read from From
// -- Begin, or where an earlier holder's pushes stopped.
type PSSplit struct {
	Split, Epoch, Begin, End, From int64
	// ReplayEnd > From: the first batch must end here (a lost holder's
	// last batch, pushed again whole).
	ReplayEnd int64
}

// PSSplitNext returns this worker's next split (dynamic splits: option
// ps_split_samples on ps task 0), or nil when every split is handed out.
func (c *Context) PSSplitNext() (*PSSplit, error) {
	v := make([]int64, 6)
	if err := capi.Hb_ps_split_next(c.raw(), ptr(v)); err != nil {
		return nil, err
	}
	if v[0] < 0 {
		return nil, nil
	}
	return &PSSplit{v[0], v[1], v[2], v[3], v[4], v[5]}, nil
}

// PSSplitLater is PSSplitTry's Split when no split can be handed out now.
const PSSplitLater = -2

// PSSplitTry is PSSplitNext without waiting (hb_ps_split_try): a split whose
// Split is PSSplitLater when other workers hold every split left (make an
// empty step and ask again, so a loop with job checkpoints reaches every
// save); nil when every split is finished.
func (c *Context) PSSplitTry() (*PSSplit, error) {
	v := make([]int64, 6)
	if err := capi.Hb_ps_split_try(c.raw(), ptr(v)); err != nil {
		return nil, err
	}
	if v[0] == -1 {
		return nil, nil
	}
	return &PSSplit{v[0], v[1], v[2], v[3], v[4], v[5]}, nil
}

// PSSplitCommit is called before a step's pushes (in place of PSSetPosition):
// the step consumes split up to offset (its End finishes it). The position
// rides with the pushes; the queue hears of it at the next call.
func (c *Context) PSSplitCommit(split, offset int64) error {
	return capi.Ps_split_commit(c.raw(), split, offset)
}

// PSDenseConfig mirrors hb_ps_dense_config. Start from DefaultPSDenseConfig,
// which holds hb.h's defaults.
type PSDenseConfig struct {
	Name               string // unique among the job's ps tables
	Count              int64  // float32 elements
	Optimizer          int32
	LearningRate       float64
	InitialAccumulator float64
	Beta1, Beta2       float64
	Epsilon            float64
	L1, L2, LRPower    float64
}

// DefaultPSDenseConfig is HB_PS_DENSE_CONFIG_INIT with a name and a size.
func DefaultPSDenseConfig(name string, count int64) PSDenseConfig {
	c := capi.NewPs_dense_config()
	defer capi.DeletePs_dense_config(c)
	return PSDenseConfig{
		Name: name, Count: count, Optimizer: c.GetOptimizer(),
		LearningRate: c.GetLearning_rate(), InitialAccumulator: c.GetInitial_accumulator(),
		Beta1: c.GetBeta1(), Beta2: c.GetBeta2(), Epsilon: c.GetEpsilon(),
		L1: c.GetL1(), L2: c.GetL2(), LRPower: c.GetLr_power(),
	}
}

func (d *PSDenseConfig) native() capi.Ps_dense_config {
	c := capi.NewPs_dense_config()
	c.SetName(d.Name)
	c.SetCount(d.Count)
	c.SetOptimizer(d.Optimizer)
	c.SetLearning_rate(d.LearningRate)
	c.SetInitial_accumulator(d.InitialAccumulator)
	c.SetBeta1(d.Beta1)
	c.SetBeta2(d.Beta2)
	c.SetEpsilon(d.Epsilon)
	c.SetL1(d.L1)
	c.SetL2(d.L2)
	c.SetLr_power(d.LRPower)
	return c
}

// PSDense is a dense float32 buffer on the ps tasks (hb_ps_dense;
// tensorpack's parameter_server layout): Pull before the step, Push the
// gradient after; the ps tasks apply its optimizer element-wise, with the
// tables' staleness and rounds. Each call is one cgo call into the caller's
// slice, without a copy.
type PSDense struct {
	handle
	count int64
}

// NewPSDense creates (the first worker) or attaches to a dense buffer; every
// worker passes the same config. init: Count values, or nil (zeros), taken
// from the worker that creates it first.
func NewPSDense(c *Context, config PSDenseConfig, init []float32) (*PSDense, error) {
	if init != nil && int64(len(init)) != config.Count {
		return nil, argError("init: needs %d elements, has %d", config.Count, len(init))
	}
	n := config.native()
	defer capi.DeletePs_dense_config(n)
	d := &PSDense{count: config.Count}
	if err := capi.Hb_ps_dense_create(c.raw(), n, ptr(init), &d.h); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *PSDense) raw() uintptr { return d.get("PSDense") }

// Close frees the buffer's handle (the values stay on the ps tasks);
// closing twice is fine.
func (d *PSDense) Close() error {
	d.close(capi.Ps_dense_destroy)
	return nil
}

// Count is the number of float32 elements.
func (d *PSDense) Count() int64 { return d.count }

// Pull writes the buffer as of this worker's step into out (Count elements).
func (d *PSDense) Pull(out []float32) error {
	if int64(len(out)) != d.count {
		return argError("out: needs %d elements, has %d", d.count, len(out))
	}
	return capi.Ps_dense_pull(d.raw(), ptr(out))
}

// Push sends one optimizer step's gradient (Count elements; summed over the
// workers of a round at staleness 0).
func (d *PSDense) Push(grads []float32) error {
	if int64(len(grads)) != d.count {
		return argError("grads: needs %d elements, has %d", d.count, len(grads))
	}
	return capi.Ps_dense_push(d.raw(), ptr(grads))
}
