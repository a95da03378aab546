// Package hb is the Go binding of libhb: collectives, sharded embeddings and
// metrics for distributed training of recommendation models.
//
// Buffers are slices: the element type gives the dtype (Float16 and BFloat16
// for the 16-bit floats); they are passed to C without a copy. A failed call
// returns an *Error carrying the status and the message of that call
// (hb_last_error is not exposed: it is thread-local and a goroutine may
// change threads between two calls). Every handle has a Close method.
package hb

import (
	"fmt"
	"runtime/cgo"
	"unsafe"

	"hb.dev/hb/internal/capi"
)

// Error is a failed hb call: Status (one of the Err* constants), its Name
// ("HB_ERR_TIMEOUT") and Message (what was wrong, from the failing call).
type Error = capi.Error

// Status codes (hb.h's HB_OK / HB_ERR_*).
const (
	OK                 = 0
	ErrInvalidArgument = 1
	ErrConfig          = 2
	ErrTimeout         = 3
	ErrPeerFailed      = 4
	ErrAborted         = 5
	ErrIO              = 6
	ErrOutOfMemory     = 7
	ErrUnsupported     = 8
	ErrDevice          = 9
	ErrPermission      = 10
	ErrCorrupt         = 11
	ErrInternal        = 12
	ErrMismatch        = 13
)

// DType is an element type (hb.h's HB_FLOAT32 ...).
type DType = int32

// Data types.
const (
	Float32DType  DType = 0
	Float64DType  DType = 1
	Float16DType  DType = 2
	BFloat16DType DType = 3
	Int32DType    DType = 4
	Int64DType    DType = 5
	Uint8DType    DType = 6
)

// ReduceOp is a reduction (hb.h's HB_SUM ...).
type ReduceOp = int32

// Reductions. Avg truncates toward zero for integer types.
const (
	Sum  ReduceOp = 0
	Prod ReduceOp = 1
	Min  ReduceOp = 2
	Max  ReduceOp = 3
	Avg  ReduceOp = 4
)

// Events passed to listeners.
const (
	EventBeforeSave = 0
	EventAfterSave  = 1
	EventBeforeLoad = 2
	EventAfterLoad  = 3
)

// Embedding partitions, initializers and optimizers.
const (
	PartitionMod = 0
	PartitionDiv = 1

	InitZeros    = 0
	InitConstant = 1
	InitUniform  = 2
	InitNormal   = 3

	OptSGD     = 0
	OptAdagrad = 1
	OptAdam    = 2
	OptFTRL    = 3
)

// Metric kinds, AUC curves and summations, GAUC weightings and result flags.
const (
	MetricAccuracy = 0
	MetricMean     = 1
	MetricAUC      = 2
	MetricAUCExact = 3
	MetricGAUC     = 4

	CurveROC = 0
	CurvePR  = 1

	SummationTrapezoidal          = 0
	SummationCarefulInterpolation = 1
	SummationMinoring             = 2
	SummationMajoring             = 3

	GAUCUnweighted  = 0
	GAUCImpressions = 1
	GAUCClicks      = 2

	MetricFlagEmpty       = 1
	MetricFlagSingleClass = 2
	MetricFlagApproximate = 4
)

// Float16 holds the bits of an IEEE 754 binary16 number.
type Float16 uint16

// BFloat16 holds the bits of a bfloat16 number.
type BFloat16 uint16

// Number is every element type hb reduces and moves.
type Number interface {
	float32 | float64 | int32 | int64 | uint8 | Float16 | BFloat16
}

func dtypeOf[T Number]() DType {
	var zero T
	switch any(zero).(type) {
	case float32:
		return Float32DType
	case float64:
		return Float64DType
	case Float16:
		return Float16DType
	case BFloat16:
		return BFloat16DType
	case int32:
		return Int32DType
	case int64:
		return Int64DType
	}
	return Uint8DType
}

// ptr is the start of s (nil when empty): Go memory without Go pointers,
// which cgo lets C read and write during the call.
func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// argError reports a bad argument the way the library would.
func argError(format string, args ...any) error {
	return &Error{Status: ErrInvalidArgument, Name: "HB_ERR_INVALID_ARGUMENT", Message: fmt.Sprintf(format, args...)}
}

// VersionNumber is the loaded library's MAJOR*10000 + MINOR*100 + PATCH.
func VersionNumber() uint { return capi.Version_number() }

// BuildInfo describes the build and the machine in one line.
func BuildInfo() string { return capi.Build_info() }

// StatusName is the constant name of a status, e.g. "HB_ERR_TIMEOUT".
func StatusName(status int32) string { return capi.Status_name(status) }

// DTypeSize is the size in bytes of one element; 0 for an unknown dtype.
func DTypeSize(dtype DType) int64 { return capi.Dtype_size(dtype) }

// GetOption is the process-wide value of an option (default plus HB_<NAME>).
func GetOption(name string) (string, error) {
	var value string
	err := capi.Hb_context_get_option(0, name, &value)
	return value, err
}

// OptionInfo describes one option.
type OptionInfo struct{ Name, Type, Default, Doc string }

// DescribeOption describes option number index (an error past the last one).
func DescribeOption(index int) (OptionInfo, error) {
	var o OptionInfo
	err := capi.Option_describe(int64(index), &o.Name, &o.Type, &o.Default, &o.Doc)
	return o, err
}

// TFConfigBuild writes a TF_CONFIG JSON document, as HybridBackend's set_tf_config.
func TFConfigBuild(taskType string, taskID int, workerHosts, psHosts []string, hasEvaluator bool) (string, error) {
	workers, ps := capi.NewStringList(workerHosts), capi.NewStringList(psHosts)
	defer workers.Free()
	defer ps.Free()
	var doc string
	err := capi.Hb_tf_config_build(taskType, int32(taskID), workers, ps, boolInt(hasEvaluator), &doc)
	return doc, err
}

// ShardRange is shard's contiguous, even share [begin, end) of numItems items.
func ShardRange(numItems int64, numShards, shard int, strict bool) (begin, end int64, err error) {
	err = capi.Shard_range(numItems, int32(numShards), int32(shard), boolInt(strict), &begin, &end)
	return
}

// Placement says which parts of an AdaNet ensemble a worker builds and trains.
type Placement struct {
	BuildEnsemble    bool
	TrainSubnetworks bool
	BuildSubnetwork  []bool
}

func placement(numSubnetworks int, call func(ensemble, train *int32, build unsafe.Pointer) error) (Placement, error) {
	if numSubnetworks < 0 {
		return Placement{}, argError("numSubnetworks: must be >= 0, got %d", numSubnetworks)
	}
	var ensemble, train int32
	build := make([]int32, numSubnetworks)
	if err := call(&ensemble, &train, ptr(build)); err != nil {
		return Placement{}, err
	}
	p := Placement{BuildEnsemble: ensemble != 0, TrainSubnetworks: train != 0, BuildSubnetwork: make([]bool, numSubnetworks)}
	for i, b := range build {
		p.BuildSubnetwork[i] = b != 0
	}
	return p, nil
}

// PlacementReplication answers as AdaNet's ReplicationStrategy.
func PlacementReplication(numWorkers, workerIndex, numSubnetworks int) (Placement, error) {
	return placement(numSubnetworks, func(e, t *int32, b unsafe.Pointer) error {
		return capi.Placement_replication(int32(numWorkers), int32(workerIndex), int32(numSubnetworks), e, t, b)
	})
}

// PlacementRoundRobin answers as AdaNet's RoundRobinStrategy.
func PlacementRoundRobin(numWorkers, workerIndex, numSubnetworks int, dropRemainder bool) (Placement, error) {
	return placement(numSubnetworks, func(e, t *int32, b unsafe.Pointer) error {
		return capi.Placement_round_robin(int32(numWorkers), int32(workerIndex), int32(numSubnetworks),
			boolInt(dropRemainder), e, t, b)
	})
}

func boolInt(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// handle is one C handle; its owner's Close frees it once.
type handle struct{ h uintptr }

func (p *handle) get(what string) uintptr {
	if p.h == 0 {
		panic("hb: use of a closed " + what)
	}
	return p.h
}

func (p *handle) close(destroy func(uintptr)) {
	if p.h != 0 {
		destroy(p.h)
		p.h = 0
	}
}

// ---- Context -------------------------------------------------------------

// Context is a group of ranks (hb_context). Close it after the embeddings
// and metrics made on it.
type Context struct {
	handle
	listeners []cgo.Handle
}

// ContextOption sets one explicit cluster setting; unset ones are discovered
// (hbrun's HB_* variables, then TF_CONFIG, then a world of one).
type ContextOption func(capi.Context_options)

// WithRank sets this process's rank.
func WithRank(rank int) ContextOption { return func(o capi.Context_options) { o.SetRank(int32(rank)) } }

// WithWorldSize sets the number of ranks.
func WithWorldSize(n int) ContextOption {
	return func(o capi.Context_options) { o.SetWorld_size(int32(n)) }
}

// WithLocalRank sets the rank within this machine.
func WithLocalRank(r int) ContextOption {
	return func(o capi.Context_options) { o.SetLocal_rank(int32(r)) }
}

// WithLocalWorldSize sets the number of ranks on this machine.
func WithLocalWorldSize(n int) ContextOption {
	return func(o capi.Context_options) { o.SetLocal_world_size(int32(n)) }
}

// WithRendezvous sets the "host:port" of the rendezvous store.
func WithRendezvous(hostPort string) ContextOption {
	return func(o capi.Context_options) { o.SetRendezvous(hostPort) }
}

// WithOptions sets options, "name=value,name=value".
func WithOptions(assignments string) ContextOption {
	return func(o capi.Context_options) { o.SetOptions(assignments) }
}

// NewContext forms the cluster: collective, every rank must call it.
func NewContext(opts ...ContextOption) (*Context, error) {
	o := capi.NewContext_options()
	defer capi.DeleteContext_options(o)
	for _, set := range opts {
		set(o)
	}
	c := &Context{}
	if err := capi.Context_create(o, &c.h); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Context) raw() uintptr { return c.get("Context") }

// Close leaves the cluster and frees everything (not collective); closing
// twice is fine.
func (c *Context) Close() error {
	c.close(capi.Context_destroy)
	for _, l := range c.listeners {
		l.Delete()
	}
	c.listeners = nil
	return nil
}

func (c *Context) Rank() int           { return int(capi.Context_rank(c.raw())) }
func (c *Context) WorldSize() int      { return int(capi.Context_world_size(c.raw())) }
func (c *Context) LocalRank() int      { return int(capi.Context_local_rank(c.raw())) }
func (c *Context) LocalWorldSize() int { return int(capi.Context_local_world_size(c.raw())) }
func (c *Context) IsChief() bool       { return capi.Context_is_chief(c.raw()) != 0 }
func (c *Context) TaskType() string    { return capi.Context_task_type(c.raw()) }
func (c *Context) TaskID() int         { return int(capi.Context_task_id(c.raw())) }
func (c *Context) NumGPUs() int        { return int(capi.Context_num_gpus(c.raw())) }

// Device is "cpu:0" or "cuda:N".
func (c *Context) Device() string { return capi.Context_device(c.raw()) }

// GetOption is the current value of an option.
func (c *Context) GetOption(name string) (string, error) {
	var value string
	err := capi.Hb_context_get_option(c.raw(), name, &value)
	return value, err
}

// SetOption sets an option; a malformed value or unknown name is ErrConfig.
func (c *Context) SetOption(name, value string) error {
	return capi.Context_set_option(c.raw(), name, value)
}

// Barrier waits for every rank; timeoutMs <= 0 uses the timeout_ms option.
func (c *Context) Barrier(timeoutMs int64) error { return capi.Context_barrier(c.raw(), timeoutMs) }

// Abort makes every rank's pending and later calls fail with ErrAborted.
func (c *Context) Abort(reason string) error { return capi.Context_abort(c.raw(), reason) }

// SetCUDAStream sets the cudaStream_t for GPU work; 0 restores the context's own.
func (c *Context) SetCUDAStream(stream uintptr) error {
	return capi.Context_set_cuda_stream(c.raw(), stream)
}

// Synchronize waits for the GPU work enqueued on the context's stream.
func (c *Context) Synchronize() error { return capi.Context_synchronize(c.raw()) }

// AddListener calls fn(event, path) around checkpoint saves and loads.
func (c *Context) AddListener(event int32, fn func(event int32, path string)) error {
	h := capi.NewListener(fn)
	if err := capi.Context_add_listener(c.raw(), event, uintptr(h)); err != nil {
		h.Delete()
		return err
	}
	c.listeners = append(c.listeners, h)
	return nil
}

// DataSync tells this step whether to go on and whether to feed an empty batch.
func (c *Context) DataSync(hasData, dropRemainder bool) (proceed, feedEmpty bool, err error) {
	var p, e int32
	err = capi.Data_sync(c.raw(), boolInt(hasData), boolInt(dropRemainder), &p, &e)
	return p != 0, e != 0, err
}

// ---- Collectives (same order on every rank; recv may be send: in place) ---

func needLen(param string, have, want int) error {
	if have < want {
		return argError("%s: needs %d elements, has %d", param, want, have)
	}
	return nil
}

// Allreduce reduces send over every rank into recv.
func Allreduce[T Number](c *Context, send, recv []T, op ReduceOp) error {
	if err := needLen("recv", len(recv), len(send)); err != nil {
		return err
	}
	return capi.Allreduce(c.raw(), ptr(send), ptr(recv), int64(len(send)), dtypeOf[T](), op)
}

// AllreduceRequest is an allreduce in flight (AllreduceStart). cgo forbids
// C to keep a Go pointer after a call returns, so the data lives in C memory
// meanwhile: the start copies send there, Wait copies the result out.
type AllreduceRequest[T Number] struct {
	h   uintptr
	buf *capi.BufferList
	n   int
}

// AllreduceStart starts Allreduce(send) on the context's progress thread
// (hb_allreduce_start) and returns at once; send may change afterwards.
// Wait gives the result, bit-identical to Allreduce's. Started allreduces
// run in start order; any other call may run on the context meanwhile.
func AllreduceStart[T Number](c *Context, send []T, op ReduceOp) (*AllreduceRequest[T], error) {
	var zero T
	buf := capi.NewBufferList([]int{len(send)}, int(unsafe.Sizeof(zero)))
	copy(unsafe.Slice((*T)(buf.Data(0)), len(send)), send)
	var h uintptr // a local: cgo refuses a pointer into a struct that holds Go pointers
	err := capi.Allreduce_start(c.raw(), buf.Data(0), buf.Data(0), int64(len(send)), dtypeOf[T](), op, &h)
	if err != nil {
		buf.Free()
		return nil, err
	}
	return &AllreduceRequest[T]{h: h, buf: buf, n: len(send)}, nil
}

// Wait waits for the allreduce (hb_allreduce_wait) and copies its result
// into recv (at least as long as send). On ErrTimeout it is still in
// flight: wait again. Call it once per request, also after an error.
func (r *AllreduceRequest[T]) Wait(recv []T) error {
	if r.buf == nil {
		return argError("AllreduceRequest.Wait: already waited for")
	}
	if err := needLen("recv", len(recv), r.n); err != nil {
		return err
	}
	err := capi.Allreduce_wait(r.h)
	if e, ok := err.(*Error); ok && e.Status == ErrTimeout {
		return err // the library still writes the staged buffer
	}
	if err == nil {
		copy(recv, unsafe.Slice((*T)(r.buf.Data(0)), r.n))
	}
	r.buf.Free()
	r.buf = nil
	return err
}

// Allgather puts rank r's send at recv[r*len(send):].
func Allgather[T Number](c *Context, send, recv []T) error {
	if err := needLen("recv", len(recv), len(send)*c.WorldSize()); err != nil {
		return err
	}
	return capi.Allgather(c.raw(), ptr(send), ptr(recv), int64(len(send)), dtypeOf[T]())
}

func extent(param string, counts, offsets []int64, world int) (int, error) {
	if len(counts) != world || (offsets != nil && len(offsets) != world) {
		return 0, argError("%s: expected %d counts (and offsets), one per rank", param, world)
	}
	n := int64(0)
	for i, c := range counts {
		if offsets == nil {
			n += c
		} else if offsets[i]+c > n {
			n = offsets[i] + c
		}
	}
	return int(n), nil
}

// Allgatherv puts rank r's send (recvCounts[r] elements) at recvOffsets[r]
// (offsets nil: packed in rank order).
func Allgatherv[T Number](c *Context, send, recv []T, recvCounts, recvOffsets []int64) error {
	n, err := extent("recvCounts", recvCounts, recvOffsets, c.WorldSize())
	if err == nil {
		err = needLen("recv", len(recv), n)
	}
	if err != nil {
		return err
	}
	return capi.Allgatherv(c.raw(), ptr(send), int64(len(send)), ptr(recv), ptr(recvCounts),
		ptr(recvOffsets), dtypeOf[T]())
}

// Alltoall sends block p of send (len(send)/world elements) to rank p.
func Alltoall[T Number](c *Context, send, recv []T) error {
	world := c.WorldSize()
	if len(send)%world != 0 {
		return argError("send: %d elements do not split into %d blocks", len(send), world)
	}
	if err := needLen("recv", len(recv), len(send)); err != nil {
		return err
	}
	return capi.Alltoall(c.raw(), ptr(send), ptr(recv), int64(len(send)/world), dtypeOf[T]())
}

// Alltoallv exchanges per-peer counts at offsets (nil: packed in rank order).
func Alltoallv[T Number](c *Context, send []T, sendCounts, sendOffsets []int64, recv []T, recvCounts,
	recvOffsets []int64) error {
	world := c.WorldSize()
	ns, err := extent("sendCounts", sendCounts, sendOffsets, world)
	if err == nil {
		err = needLen("send", len(send), ns)
	}
	if err != nil {
		return err
	}
	nr, err := extent("recvCounts", recvCounts, recvOffsets, world)
	if err == nil {
		err = needLen("recv", len(recv), nr)
	}
	if err != nil {
		return err
	}
	return capi.Alltoallv(c.raw(), ptr(send), ptr(sendCounts), ptr(sendOffsets), ptr(recv),
		ptr(recvCounts), ptr(recvOffsets), dtypeOf[T]())
}

// Broadcast copies root's send into recv on every rank (send may be nil elsewhere).
func Broadcast[T Number](c *Context, send, recv []T, root int) error {
	if send != nil {
		if err := needLen("send", len(send), len(recv)); err != nil {
			return err
		}
	}
	return capi.Broadcast(c.raw(), ptr(send), ptr(recv), int64(len(recv)), dtypeOf[T](), int32(root))
}

// ReduceScatter gives rank r the reduction of block r of send (world blocks of len(recv)).
func ReduceScatter[T Number](c *Context, send, recv []T, op ReduceOp) error {
	if err := needLen("send", len(send), len(recv)*c.WorldSize()); err != nil {
		return err
	}
	return capi.Reduce_scatter(c.raw(), ptr(send), ptr(recv), int64(len(recv)), dtypeOf[T](), op)
}

// AllreduceMany reduces every tensor in place, fused into buckets. cgo
// forbids a C list of Go pointers, so the tensors are staged in C memory.
func AllreduceMany[T Number](c *Context, tensors [][]T, op ReduceOp) error {
	counts := make([]int, len(tensors))
	for i, t := range tensors {
		counts[i] = len(t)
	}
	var zero T
	list := capi.NewBufferList(counts, int(unsafe.Sizeof(zero)))
	defer list.Free()
	for i, t := range tensors {
		copy(unsafe.Slice((*T)(list.Data(i)), len(t)), t)
	}
	if err := capi.Allreduce_many(c.raw(), list, dtypeOf[T](), op); err != nil {
		return err
	}
	for i, t := range tensors {
		copy(t, unsafe.Slice((*T)(list.Data(i)), len(t)))
	}
	return nil
}
