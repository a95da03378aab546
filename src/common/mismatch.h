// Cross-rank call signatures: each rank sends a few int64 describing the
// collective it is making (operation, configuration, sequence number, counts)
// in a header the exchange has anyway; every rank receives every rank's and
// so reaches the same verdict, naming the same ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace hb {

// rows: w rows of `stride` int64; fields [first, first + n) of each row are
// the signature. Throws HB_ERR_MISMATCH when any rank's signature differs
// from rank 0's: "<what>: ranks made mismatched collective calls (ranks 2,3
// differ from rank 0): rank 0: <describe(row 0)>; rank 1: ...".
void check_same_calls(
    const int64_t *rows, int w, int stride, int first, int n, const char *what,
    const std::function<std::string(const int64_t *)> &describe);

}  // namespace hb
