package hb

import "hb.dev/hb/internal/capi"

// EmbeddingConfig mirrors hb_embedding_config. Start from
// DefaultEmbeddingConfig, which holds hb.h's defaults.
type EmbeddingConfig struct {
	Name               string
	Dim                int64
	DType              DType
	NumRows            int64 // > 0: static ids [0, NumRows); 0: dynamic hash table
	Partition          int32
	Initializer        int32
	InitA, InitB       float64
	Seed               uint64
	Optimizer          int32
	LearningRate       float64
	InitialAccumulator float64
	Beta1, Beta2       float64
	Epsilon            float64
	L1, L2, LRPower    float64
	WireDType          DType
	Device             int32 // -1: host memory; N: CUDA device N
	// PlacementWorkers (sharded over the ranks) or PlacementPS (on the
	// job's ps tasks; lookups and updates are then not collective).
	Placement int32
	// Admission and eviction (EXPERIMENTAL); nil: none.
	Lifecycle *EmbeddingLifecycle
}

// DefaultEmbeddingConfig is HB_EMBEDDING_CONFIG_INIT with a name and a row width.
func DefaultEmbeddingConfig(name string, dim int64) EmbeddingConfig {
	c := capi.NewEmbedding_config()
	defer capi.DeleteEmbedding_config(c)
	return EmbeddingConfig{
		Name: name, Dim: dim, DType: c.GetDtype(), NumRows: c.GetNum_rows(),
		Partition: c.GetPartition(), Initializer: c.GetInitializer(),
		InitA: c.GetInit_a(), InitB: c.GetInit_b(), Seed: c.GetSeed(),
		Optimizer: c.GetOptimizer(), LearningRate: c.GetLearning_rate(),
		InitialAccumulator: c.GetInitial_accumulator(), Beta1: c.GetBeta1(),
		Beta2: c.GetBeta2(), Epsilon: c.GetEpsilon(), L1: c.GetL1(), L2: c.GetL2(),
		LRPower: c.GetLr_power(), WireDType: c.GetWire_dtype(), Device: c.GetDevice(),
		Placement: c.GetPlacement(),
	}
}

func (e *EmbeddingConfig) native() capi.Embedding_config {
	c := capi.NewEmbedding_config()
	c.SetName(e.Name)
	c.SetDim(e.Dim)
	c.SetDtype(e.DType)
	c.SetNum_rows(e.NumRows)
	c.SetPartition(e.Partition)
	c.SetInitializer(e.Initializer)
	c.SetInit_a(e.InitA)
	c.SetInit_b(e.InitB)
	c.SetSeed(e.Seed)
	c.SetOptimizer(e.Optimizer)
	c.SetLearning_rate(e.LearningRate)
	c.SetInitial_accumulator(e.InitialAccumulator)
	c.SetBeta1(e.Beta1)
	c.SetBeta2(e.Beta2)
	c.SetEpsilon(e.Epsilon)
	c.SetL1(e.L1)
	c.SetL2(e.L2)
	c.SetLr_power(e.LRPower)
	c.SetWire_dtype(e.WireDType)
	c.SetDevice(e.Device)
	c.SetPlacement(e.Placement)
	if e.Lifecycle != nil {
		e.Lifecycle.useIn(c)
	}
	return c
}

// Embedding is a table sharded over a context's ranks, or a read-only
// serving table (OpenEmbedding; lookups are then safe from many goroutines,
// and Update follows newer versions while they run). Rows are float32.
type Embedding struct {
	handle
	dim int64 // fixed for the handle's life
}

// NewEmbedding creates this rank's shard of a table: collective.
func NewEmbedding(c *Context, config EmbeddingConfig) (*Embedding, error) {
	n := config.native()
	defer capi.DeleteEmbedding_config(n)
	e := &Embedding{}
	if err := capi.Embedding_create(c.raw(), n, &e.h); err != nil {
		return nil, err
	}
	e.dim = capi.Embedding_dim(e.h)
	return e, nil
}

// OpenEmbedding opens an exported table read-only, with no context.
func OpenEmbedding(path string) (*Embedding, error) {
	e := &Embedding{}
	if err := capi.Embedding_open(path, &e.h); err != nil {
		return nil, err
	}
	e.dim = capi.Embedding_dim(e.h)
	return e, nil
}

func (e *Embedding) raw() uintptr { return e.get("Embedding") }

// Close frees the table; closing twice is fine.
func (e *Embedding) Close() error {
	e.close(capi.Embedding_destroy)
	return nil
}

func (e *Embedding) Dim() int64       { return e.dim }
func (e *Embedding) LocalRows() int64 { return capi.Embedding_local_rows(e.raw()) }

// Misses counts ids a serving table did not hold.
func (e *Embedding) Misses() uint64 { return capi.Embedding_misses(e.raw()) }

// Lookup writes the rows of ids into out (len(ids) x Dim).
func (e *Embedding) Lookup(ids []int64, out []float32) error {
	_, err := e.LookupVersion(ids, out)
	return err
}

// LookupVersion writes the rows of ids into out (len(ids) x Dim) and
// returns the version they came from (0 for a sharded table or an
// unversioned export): one cgo call, no copy, no allocation.
func (e *Embedding) LookupVersion(ids []int64, out []float32) (int64, error) {
	if len(out)/int(e.dim) < len(ids) {
		return 0, needLen("out", len(out), len(ids)*int(e.dim))
	}
	return capi.LookupVersion(e.raw(), ptr(ids), len(ids), ptr(out))
}

// ApplyGradients runs one optimizer step per touched row; grads is len(ids) x Dim.
func (e *Embedding) ApplyGradients(ids []int64, grads []float32) error {
	if err := needLen("grads", len(grads), len(ids)*int(e.Dim())); err != nil {
		return err
	}
	return capi.Embedding_apply_gradients(e.raw(), ptr(ids), int64(len(ids)), ptr(grads))
}

// Save checkpoints rows and optimizer slots into dir: collective.
func (e *Embedding) Save(dir string) error { return capi.Embedding_save(e.raw(), dir) }

// Load restores a checkpoint, re-sharding if needed: collective.
func (e *Embedding) Load(dir string) error { return capi.Embedding_load(e.raw(), dir) }

// Export writes one serving file (rank 0 writes): collective.
func (e *Embedding) Export(path string) error { return capi.Embedding_export(e.raw(), path) }

// ExportVersion writes version `version` (larger than every earlier one) in
// full (base 0) or as a delta since the export of version base: collective.
func (e *Embedding) ExportVersion(path string, version, base int64) error {
	return capi.Embedding_export_version(e.raw(), path, version, base)
}

// Update applies the delta or opens the newer full export at path while
// other goroutines keep looking up (serving tables). A damaged or
// out-of-order file is an error and the served version stays.
func (e *Embedding) Update(path string) error { return capi.Embedding_update(e.raw(), path) }

// Version is the served version (0 for an unversioned export).
func (e *Embedding) Version() int64 { return capi.Embedding_version(e.raw()) }
