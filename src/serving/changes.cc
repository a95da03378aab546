#include "serving/changes.h"

#include "abi/error.h"

namespace hb {
namespace serving {

// Until the table keeps change stamps, only full versions can be exported.
uint64_t write_clock(emb::Table &) { return 0; }

void rows_changed_since(emb::Table &t, uint64_t,
                        const std::function<void(int64_t, const float *)> &) {
  fail(HB_ERR_UNSUPPORTED,
       "hb_embedding_export_version('%s'): delta exports need the table's "
       "change stamps, which this build does not keep",
       t.spec().name.c_str());
}

std::vector<int64_t> evicted_since(emb::Table &, uint64_t) { return {}; }

void retain_evictions_since(emb::Table &, uint64_t) {}

}  // namespace serving
}  // namespace hb
