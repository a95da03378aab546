// hb_data_sync: unbalanced data across ranks (HybridBackend's
// data_sync_drop_remainder). One allreduce(MAX) of two int32 per step,
// [has_data, out_of_data], tells every rank whether any rank still has data
// and whether any rank ran out; each rank then decides the same way.
#pragma once

#include <cstdint>

namespace hb {
namespace data {

struct SyncDecision {
  int32_t cont;        // run this step
  int32_t feed_empty;  // run it with an empty batch
};

// any_has / any_out: the MAX over ranks of has_data / !has_data.
//  - drop_remainder: continue only while no rank is out;
//  - otherwise: continue while any rank has data; ranks that are out feed
//    empty batches.
SyncDecision decide(int32_t any_has, int32_t any_out, bool drop_remainder,
                    bool local_has_data);

}  // namespace data
}  // namespace hb
