#include "common/agreement.h"

#include "abi/error.h"
#include "common/mismatch.h"

namespace hb {

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
  } catch (...) {
    status = HB_ERR_INTERNAL;
    message = "unknown exception";
  }
}

const char *call_op_name(int64_t op) {
  switch (op) {
    case kCallNone:
      return "an unchecked step";
    case kCallCreate:
      return "hb_embedding_create";
    case kCallLookup:
      return "hb_embedding_lookup";
    case kCallApply:
      return "hb_embedding_apply_gradients";
    case kCallSave:
      return "hb_embedding_save";
    case kCallLoad:
      return "hb_embedding_load";
    case kCallExport:
      return "hb_embedding_export";
    case kCallExportVersion:
      return "hb_embedding_export_version";
  }
  return "an unknown operation";
}

namespace {
const int kHeader = 7;  // status, has_detail, detail, value, op, table, seq
}  // namespace

std::vector<int64_t> agree(Exchange &x, const Outcome &mine,
                           const std::vector<int64_t> &value_to,
                           const char *what, const char *detail_name) {
  const int w = x.world();
  std::vector<int64_t> send(kHeader * w), recv(kHeader * w);
  for (int p = 0; p < w; ++p) {
    int64_t *h = &send[kHeader * p];
    h[0] = mine.status;
    h[1] = mine.has_detail;
    h[2] = mine.detail;
    h[3] = mine.status == HB_OK ? value_to[p] : 0;
    h[4] = mine.sig.op;
    h[5] = mine.sig.table;
    h[6] = mine.sig.seq;
  }
  x.alltoall(send.data(), recv.data(), kHeader);
  // Calls on different tables: every rank sees it and sends its table's
  // name, so the message can name the tables.
  std::vector<std::string> names;
  for (int p = 1; p < w && names.empty(); ++p)
    if (recv[kHeader * p + 5] != recv[5])
      names = gather_strings(x, mine.sig.name ? *mine.sig.name : "");
  check_same_calls(recv.data(), w, kHeader, 4, 3, what, [&](const int64_t *h) {
    const size_t p = static_cast<size_t>(h - recv.data()) / kHeader;
    std::string table = names.empty() || names[p].empty()
                            ? format("table %016llx", (unsigned long long)h[5])
                            : format("table '%s'", names[p].c_str());
    return format("%s, %s, call %lld", call_op_name(h[4]), table.c_str(),
                  (long long)h[6]);
  });
  if (mine.sig.counter) ++*mine.sig.counter;
  int failed = -1;
  for (int p = 0; p < w && failed < 0; ++p)
    if (recv[kHeader * p] != HB_OK) failed = p;
  if (failed >= 0) {
    // Every rank sees the same statuses, so all exchange the messages: each
    // rank reports the real reason, not only which rank failed.
    std::vector<std::string> why =
        gather_strings(x, mine.status == HB_OK ? "" : mine.message);
    if (mine.status != HB_OK) throw Error(mine.status, mine.message);
    const int64_t *h = &recv[kHeader * failed];
    hb_status st = static_cast<hb_status>(h[0]);
    std::string detail =
        detail_name && h[1] ? format(" (%s %lld)", detail_name, (long long)h[2])
                            : std::string();
    fail(st, "%s: rank %d failed with %s%s: %s", what, failed,
         hb_status_name(st), detail.c_str(), why[size_t(failed)].c_str());
  }
  std::vector<int64_t> values(w);
  for (int p = 0; p < w; ++p) values[p] = recv[kHeader * p + 3];
  return values;
}

void Exchange::alltoallv_sized(const void *, const int64_t *, const Deliver &) {
  fail(HB_ERR_INTERNAL,
       "alltoallv_sized on an exchange that needs a round of sizes first");
}

void Exchange::alltoallv_fill(const int64_t *send_bytes,
                              const int64_t *recv_bytes, const Fill &fill,
                              const Deliver &deliver) {
  const int w = world();
  std::vector<size_t> so(w + 1, 0), ro(w + 1, 0);
  for (int p = 0; p < w; ++p) {
    so[p + 1] = so[p] + static_cast<size_t>(send_bytes[p]);
    ro[p + 1] = ro[p] + static_cast<size_t>(recv_bytes[p]);
  }
  fill_send_.resize(so[w]);
  fill_recv_.resize(ro[w]);
  for (int p = 0; p < w; ++p)
    if (send_bytes[p]) fill(p, fill_send_.data() + so[p]);
  alltoallv(fill_send_.data(), send_bytes, fill_recv_.data(), recv_bytes);
  for (int p = 0; p < w; ++p)
    deliver(p, fill_recv_.data() + ro[p], static_cast<size_t>(recv_bytes[p]));
}

std::vector<std::string> gather_strings(Exchange &x, const std::string &mine) {
  const int w = x.world();
  std::vector<int64_t> size_to(w, static_cast<int64_t>(mine.size())), sizes(w);
  x.alltoall(size_to.data(), sizes.data(), 1);
  int64_t total = 0;
  for (int p = 0; p < w; ++p) {
    if (sizes[p] < 0 || sizes[p] > (int64_t(1) << 24))
      fail(HB_ERR_CORRUPT, "rank %d announced a config of %lld bytes", p,
           (long long)sizes[p]);
    total += sizes[p];
  }
  std::string send, all(static_cast<size_t>(total), '\0');
  for (int p = 0; p < w; ++p) send += mine;
  x.alltoallv(send.data(), size_to.data(), &all[0], sizes.data());
  std::vector<std::string> out;
  size_t at = 0;
  for (int p = 0; p < w; ++p) {
    out.push_back(all.substr(at, static_cast<size_t>(sizes[p])));
    at += static_cast<size_t>(sizes[p]);
  }
  return out;
}

}  // namespace hb
