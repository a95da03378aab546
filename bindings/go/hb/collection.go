package hb

import "hb.dev/hb/internal/capi"

// Pooling modes of a collection feature (hb.h's HB_POOLING_*; the values
// are checked against hb.h when the wrapper compiles, bindings/hb.i).
const (
	PoolingNone  int32 = 0
	PoolingSum   int32 = 1
	PoolingMean  int32 = 2
	PoolingSqrtN int32 = 3
)

// Collection is an embedding collection (hb_collection, STABLE section of
// hb.h): the features of a model over several tables, looked up and updated
// with one collective call each (docs/embedding-collections.md).
//
// A batch is a flat KeyedJaggedTensor: values (every feature's ids, feature
// after feature), offsets (NumFeatures*B+1 entries: sample b of feature f is
// values[offsets[f*B+b]:offsets[f*B+b+1]]) and weights (one per id, or nil).
// Pooled features fill one B x PooledWidth matrix; pooling-None features one
// row per id, concatenated in feature order (UnpooledSize). Close the
// collection before its tables.
type Collection struct {
	handle
	tables []*Embedding // kept reachable while the collection lives
	width  int
	dims   []int
	none   []bool
}

// NewCollection is collective: feature f reads tables[f] with pooling[f].
func NewCollection(c *Context, tables []*Embedding, pooling []int32) (*Collection, error) {
	if len(tables) != len(pooling) {
		return nil, argError("tables and pooling differ in length (%d, %d)", len(tables), len(pooling))
	}
	hs := make([]int64, len(tables))
	ps := make([]int64, len(tables))
	for f, t := range tables {
		hs[f] = int64(t.raw())
		ps[f] = int64(pooling[f])
	}
	var h uintptr // not &col.h: cgo refuses a pointer into memory holding Go pointers
	if err := capi.Hb_collection_create(c.raw(), ptr(hs), ptr(ps), int64(len(tables)), &h); err != nil {
		return nil, err
	}
	col := &Collection{tables: append([]*Embedding(nil), tables...)}
	col.h = h
	col.width = int(capi.Hb_collection_pooled_width(col.h))
	for f := range tables {
		col.dims = append(col.dims, int(capi.Hb_collection_feature_dim(col.h, int64(f))))
		col.none = append(col.none, capi.Hb_collection_feature_column(col.h, int64(f)) < 0)
	}
	return col, nil
}

func (c *Collection) raw() uintptr { return c.get("Collection") }

// Close frees the collection (not its tables); closing twice is fine.
func (c *Collection) Close() error {
	c.close(capi.Hb_collection_destroy)
	return nil
}

func (c *Collection) NumFeatures() int { return len(c.dims) }
func (c *Collection) PooledWidth() int { return c.width }
func (c *Collection) Dim(f int) int    { return c.dims[f] }

// Column of feature f in the pooled output; -1 for pooling None.
func (c *Collection) Column(f int) int {
	return int(capi.Hb_collection_feature_column(c.raw(), int64(f)))
}

func (c *Collection) batch(values, offsets []int64, weights []float32) (int, error) {
	nf := len(c.dims)
	if len(offsets) < 1 || (len(offsets)-1)%nf != 0 {
		return 0, argError("offsets: expected NumFeatures*B+1 = %d*B+1 entries, got %d", nf, len(offsets))
	}
	end := int(offsets[len(offsets)-1])
	if err := needLen("values", len(values), end); err != nil {
		return 0, err
	}
	if weights != nil {
		if err := needLen("weights", len(weights), end); err != nil {
			return 0, err
		}
	}
	return (len(offsets) - 1) / nf, nil
}

// UnpooledSize is the number of floats of the pooling-None rows of a batch.
func (c *Collection) UnpooledSize(offsets []int64) int {
	nf := len(c.dims)
	if len(offsets) < 1 || (len(offsets)-1)%nf != 0 {
		return 0
	}
	b, n := (len(offsets)-1)/nf, 0
	for f := 0; f < nf; f++ {
		if c.none[f] {
			n += int(offsets[(f+1)*b]-offsets[f*b]) * c.dims[f]
		}
	}
	return n
}

// Lookup (collective) writes the pooled rows (B x PooledWidth) into out
// and the pooling-None rows into unpooled (UnpooledSize floats).
func (c *Collection) Lookup(values, offsets []int64, weights, out, unpooled []float32) error {
	b, err := c.batch(values, offsets, weights)
	if err != nil {
		return err
	}
	if err := needLen("out", len(out), b*c.width); err != nil {
		return err
	}
	if err := needLen("unpooled", len(unpooled), c.UnpooledSize(offsets)); err != nil {
		return err
	}
	return capi.Hb_collection_lookup(c.raw(), int64(b), ptr(values), ptr(offsets), ptr(weights),
		ptr(out), ptr(unpooled))
}

// ApplyGradients (collective) steps the tables with the gradients of the
// pooled output and of the unpooled rows; it reuses the last lookup's plan
// when every rank passes the same ids.
func (c *Collection) ApplyGradients(values, offsets []int64, weights, gradOut, gradUnpooled []float32) error {
	b, err := c.gradBatch(values, offsets, weights, gradOut, gradUnpooled)
	if err != nil {
		return err
	}
	return capi.Hb_collection_apply_gradients(c.raw(), int64(b), ptr(values), ptr(offsets), ptr(weights),
		ptr(gradOut), ptr(gradUnpooled))
}

// ApplyGradientsDense (collective) is ApplyGradients plus the sum over the
// ranks of dense, carried in the update's own exchange
// (hb_collection_apply_gradients_dense: no round of its own, the same bits
// as Allreduce with OpSum). The sum goes to denseOut (len(dense) floats),
// or into dense itself when denseOut is nil. Every rank passes the same
// len(dense).
func (c *Collection) ApplyGradientsDense(values, offsets []int64, weights, gradOut, gradUnpooled,
	dense, denseOut []float32) error {
	b, err := c.gradBatch(values, offsets, weights, gradOut, gradUnpooled)
	if err != nil {
		return err
	}
	if denseOut == nil {
		denseOut = dense
	}
	if err := needLen("denseOut", len(denseOut), len(dense)); err != nil {
		return err
	}
	return capi.Hb_collection_apply_gradients_dense(c.raw(), int64(b), ptr(values), ptr(offsets), ptr(weights),
		ptr(gradOut), ptr(gradUnpooled), ptr(dense), ptr(denseOut), int64(len(dense)))
}

// gradBatch checks an update's batch and gradients; returns B.
func (c *Collection) gradBatch(values, offsets []int64, weights, gradOut, gradUnpooled []float32) (int, error) {
	b, err := c.batch(values, offsets, weights)
	if err != nil {
		return 0, err
	}
	if err := needLen("gradOut", len(gradOut), b*c.width); err != nil {
		return 0, err
	}
	return b, needLen("gradUnpooled", len(gradUnpooled), c.UnpooledSize(offsets))
}

// CollectionStats are this rank's counters (hb_collection_stats).
type CollectionStats struct {
	Lookups, Updates, ReusedPlans, Rounds, IDs, UniqueIDs, OwnerUnique uint64
	WireBytesSent, WireBytesRecv, DedupBoundBytes                      uint64
}

// Stats returns this rank's counters.
func (c *Collection) Stats() (CollectionStats, error) {
	s := make([]uint64, 10)
	if err := capi.Hb_collection_get_stats(c.raw(), ptr(s)); err != nil {
		return CollectionStats{}, err
	}
	return CollectionStats{s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9]}, nil
}
