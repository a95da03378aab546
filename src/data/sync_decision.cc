#include "data/data_sync.h"

namespace hb {
namespace data {

SyncDecision decide(int32_t any_has, int32_t any_out, bool drop_remainder,
                    bool local_has_data) {
  SyncDecision d;
  d.cont = drop_remainder ? !any_out : any_has != 0;
  d.feed_empty = d.cont && !local_has_data;
  return d;
}

}  // namespace data
}  // namespace hb
