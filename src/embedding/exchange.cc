#include "embedding/exchange.h"

#include "abi/error.h"

namespace hb {
namespace emb {

void Outcome::capture() {
  try {
    throw;
  } catch (const Error &e) {
    status = e.status();
    message = e.what();
  } catch (const std::bad_alloc &) {
    status = HB_ERR_OUT_OF_MEMORY;
    message = "out of memory";
  } catch (const std::exception &e) {
    status = HB_ERR_INTERNAL;
    message = e.what();
  }
}

std::vector<int64_t> agree(Exchange &x, const Outcome &mine,
                           const std::vector<int64_t> &value_to,
                           const char *what, const char *detail_name) {
  const int w = x.world();
  std::vector<int64_t> send(4 * w), recv(4 * w);
  for (int p = 0; p < w; ++p) {
    send[4 * p] = mine.status;
    send[4 * p + 1] = mine.has_detail;
    send[4 * p + 2] = mine.detail;
    send[4 * p + 3] = mine.status == HB_OK ? value_to[p] : 0;
  }
  x.alltoall(send.data(), recv.data(), 4);
  if (mine.status != HB_OK) throw Error(mine.status, mine.message);
  std::vector<int64_t> values(w);
  for (int p = 0; p < w; ++p) {
    if (recv[4 * p] != HB_OK) {
      hb_status st = static_cast<hb_status>(recv[4 * p]);
      if (detail_name && recv[4 * p + 1])
        fail(st, "%s: rank %d failed with %s (%s %lld)", what, p,
             hb_status_name(st), detail_name, (long long)recv[4 * p + 2]);
      fail(st, "%s: rank %d failed with %s", what, p, hb_status_name(st));
    }
    values[p] = recv[4 * p + 3];
  }
  return values;
}

}  // namespace emb
}  // namespace hb
