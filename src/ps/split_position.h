// The reader position of a worker in dynamic-splits mode: {split, epoch,
// offset} as the blob that rides with its pushes (hb_ps_split_commit), so
// that what the ps tasks committed says how far into which split the
// worker's applied pushes went (a restarted worker resumes there; ps task 0
// may read it to hand a lost worker's split on from the same place).
//
//   "HBSPLIT1", i64 split, i64 epoch, i64 offset (host byte order)
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace hb {
namespace ps {

struct SplitPosition {
  int64_t split = -1, epoch = 0, offset = 0;
};

inline std::string encode_split_position(const SplitPosition &p) {
  std::string s("HBSPLIT1", 8);
  s.append(reinterpret_cast<const char *>(&p.split), 8);
  s.append(reinterpret_cast<const char *>(&p.epoch), 8);
  s.append(reinterpret_cast<const char *>(&p.offset), 8);
  return s;
}

// False (and *p untouched) for any other position blob.
inline bool decode_split_position(const std::string &s, SplitPosition *p) {
  if (s.size() != 32 || s.compare(0, 8, "HBSPLIT1") != 0) return false;
  std::memcpy(&p->split, s.data() + 8, 8);
  std::memcpy(&p->epoch, s.data() + 16, 8);
  std::memcpy(&p->offset, s.data() + 24, 8);
  return true;
}

}  // namespace ps
}  // namespace hb
