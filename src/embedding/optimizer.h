// Per-row optimizer steps. A row record is `dim` weights followed by the
// optimizer's slots (each `dim` wide) and, for Adam, a 64-bit step count in
// two 32-bit words; a step reads only its own record and summed gradient,
// so the result does not depend on how the table is sharded.
//
// All arithmetic is float32 with hyperparameters rounded to float once
// (Adam's bias-corrected rate is computed in double per row, then rounded);
// the exact formulas are in docs/embedding-format.md ("Optimizers"). The
// arithmetic itself is embedding/optimizer_math.h, shared with the CUDA
// kernels.
#pragma once

#include <cstdint>

#include "embedding/optimizer_math.h"
#include "embedding/spec.h"

namespace hb {
namespace emb {

class Optimizer {
 public:
  explicit Optimizer(const Spec &spec);

  int num_slots() const { return slots_; }
  // 32-bit words per row record.
  int64_t record_words() const { return words_; }
  // Sets the slots (and step count) of a freshly created record.
  void init_slots(float *record) const;
  // One step of row `record` with summed gradient g (dim floats).
  void step(float *record, const float *g) const;

  static int64_t adam_steps(const float *record, int64_t dim);

 private:
  int32_t kind_;
  int64_t dim_;
  int slots_;
  int64_t words_;
  optmath::Hyper h_;
};

}  // namespace emb
}  // namespace hb
