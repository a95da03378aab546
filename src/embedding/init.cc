#include "embedding/init.h"

namespace hb {
namespace emb {

void init_row(const Spec &spec, uint64_t name_hash, int64_t id, float *w) {
  const initmath::Params p = init_params(spec, name_hash);
  const uint64_t key = initmath::row_key(p, id);
  for (int64_t c = 0; c < spec.dim; ++c) w[c] = initmath::weight(p, key, c);
}

}  // namespace emb
}  // namespace hb
