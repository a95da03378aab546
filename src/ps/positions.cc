#include "ps/positions.h"

#include <cstring>

#include "abi/error.h"
#include "common/bytes.h"
#include "common/file_io.h"

namespace hb {
namespace ps {
namespace {

constexpr char kMagic[8] = {'H', 'B', 'P', 'S', 'P', 'O', 'S', '1'};

Committed parse(const std::string &path, int world) {
  const std::string bytes = read_whole_file(path);
  ByteReader c(bytes, "ps positions file '" + path + "'");
  if (std::memcmp(c.take(8, "magic"), kMagic, 8) != 0)
    fail(HB_ERR_CORRUPT, "'%s' is not a ps positions file", path.c_str());
  const uint32_t saved_world = c.get<uint32_t>("world");
  if (saved_world > 65536)
    fail(HB_ERR_CORRUPT, "ps positions file '%s': world %u", path.c_str(),
         saved_world);
  Committed out;
  out.step.assign(world, {-1, -1});
  out.position.assign(world, std::string());
  for (uint32_t r = 0; r < saved_world; ++r) {
    const int64_t step = c.get<int64_t>("step"), k = c.get<int64_t>("k");
    const uint32_t n = c.get<uint32_t>("position size");
    std::string pos(c.take(n, "position"), n);
    // Ranks beyond this job's world have nothing to resume here.
    if (static_cast<int>(r) < world)
      out.step[r] = {step, k}, out.position[r] = pos;
  }
  if (c.left() != 0)
    fail(HB_ERR_CORRUPT, "ps positions file '%s': %zu bytes after the end",
         path.c_str(), c.left());
  return out;
}

}  // namespace

std::string positions_file_name(const std::string &table, uint64_t nonce,
                                int ps, int num_ps) {
  return format("%s.%016llx.positions-%d-of-%d", table.c_str(),
                static_cast<unsigned long long>(nonce), ps, num_ps);
}

emb::ShardFile write_positions(const std::string &dir, uint64_t nonce,
                               const std::string &table, int ps, int num_ps,
                               const Committed &c) {
  std::string s(kMagic, 8);
  put<uint32_t>(&s, static_cast<uint32_t>(c.step.size()));
  for (size_t r = 0; r < c.step.size(); ++r) {
    put<int64_t>(&s, c.step[r].first);
    put<int64_t>(&s, c.step[r].second);
    put<uint32_t>(&s, static_cast<uint32_t>(c.position[r].size()));
    s += c.position[r];
  }
  emb::ShardFile out;
  out.file = positions_file_name(table, nonce, ps, num_ps);
  AtomicFile f(dir + "/" + out.file);
  f.write(s.data(), s.size());
  f.commit();
  out.bytes = f.bytes();
  out.checksum = f.checksum();
  return out;
}

Committed read_positions(const std::string &dir, uint64_t nonce,
                         const std::string &table, int ps, int num_ps,
                         int old_num_ps, int world) {
  auto path = [&](int i) {
    return dir + "/" + positions_file_name(table, nonce, i, old_num_ps);
  };
  if (old_num_ps == num_ps) return parse(path(ps), world);
  Committed out = parse(path(0), world);
  for (int i = 1; i < old_num_ps; ++i) {
    Committed c = parse(path(i), world);
    for (int r = 0; r < world; ++r)
      if (c.step[r] < out.step[r])
        out.step[r] = c.step[r], out.position[r] = c.position[r];
  }
  return out;
}

}  // namespace ps
}  // namespace hb
