#include "common/mismatch.h"

#include "abi/error.h"

namespace hb {

void check_same_calls(
    const int64_t *rows, int w, int stride, int first, int n, const char *what,
    const std::function<std::string(const int64_t *)> &describe) {
  auto same = [&](int p) {
    for (int i = first; i < first + n; ++i)
      if (rows[i] != rows[static_cast<size_t>(p) * stride + i]) return false;
    return true;
  };
  std::string differ;
  for (int p = 1; p < w; ++p)
    if (!same(p)) differ += format("%s%d", differ.empty() ? "" : ",", p);
  if (differ.empty()) return;
  std::string calls;
  for (int p = 0; p < w; ++p)
    calls += format("%srank %d: %s", p ? "; " : "", p,
                    describe(rows + static_cast<size_t>(p) * stride).c_str());
  fail(HB_ERR_MISMATCH,
       "%s: ranks made mismatched collective calls (rank%s %s differ%s from "
       "rank 0): %s",
       what, differ.find(',') == std::string::npos ? "" : "s", differ.c_str(),
       differ.find(',') == std::string::npos ? "s" : "", calls.c_str());
}

}  // namespace hb
