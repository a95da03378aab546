// libFuzzer target for the reader's text path: the line splitter (range
// rule, line cap) and the line parser, on arbitrary bytes. The first byte
// picks the settings (layout, separator, cap, hashing); the rest is a file.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reader/byte_source.h"
#include "reader/line_parser.h"
#include "reader/line_splitter.h"
#include "reader/settings.h"

namespace {

class MemorySource : public hb::reader::ByteSource {
 public:
  MemorySource(const uint8_t *p, size_t n, size_t step)
      : p_(p), n_(n), step_(step) {}
  size_t read(char *buf, size_t cap) override {
    size_t k = std::min({cap, n_, step_});  // short reads, as pread may give
    std::memcpy(buf, p_, k);
    p_ += k;
    n_ -= k;
    return k;
  }

 private:
  const uint8_t *p_;
  size_t n_, step_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0], cut = data[1];
  data += 2;
  size -= 2;
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.columns = (mode & 1) ? nullptr : "LICS";
  cfg.separator = (mode & 2) ? ',' : '\t';
  cfg.max_line_bytes = (mode & 4) ? 64 : 1 << 20;
  cfg.num_rows = (mode & 8) ? 1000 : 0;
  cfg.hash = (mode & 16) ? HB_READER_HASH_MIX : HB_READER_HASH_MOD;
  cfg.log_dense = (mode >> 5) & 1;
  hb::reader::Settings s = hb::reader::settings_from_config(&cfg);

  // A range [begin, end) of the input read with the sharding rule, and the
  // rest [end, size): every line must come out once, whole or too long.
  const int64_t begin = 0, end = static_cast<int64_t>(cut) * size / 255;
  std::vector<float> dense(s.num_dense);
  std::vector<int64_t> ids(s.num_sparse);
  std::vector<uint8_t> present(s.num_sparse);
  size_t seen_bytes = 0;
  for (int part = 0; part < 2; ++part) {
    int64_t b = part == 0 ? begin : end,
            e = part == 0 ? end : static_cast<int64_t>(size);
    if (b >= e) continue;  // the shard plan makes no empty ranges
    MemorySource src(data + b, size - b, 1 + (mode >> 6) * 97);
    hb::reader::LineSplitter lines(&src, b, b > 0, e, s.max_line_bytes);
    hb::reader::Line line;
    while (lines.next(&line)) {
      if (line.offset < 0 || line.offset > static_cast<int64_t>(size))
        __builtin_trap();
      if (line.too_long) continue;
      if (line.size > static_cast<size_t>(s.max_line_bytes)) __builtin_trap();
      if (line.size > 0 && std::memchr(line.data, '\n', line.size))
        __builtin_trap();
      seen_bytes += line.size;
      float label;
      hb::reader::ParseError err;
      hb::reader::parse_line(s, line.data, line.size, &label, dense.data(),
                             ids.data(), present.data(), &err);
      for (int f = 0; f < s.num_sparse; ++f)
        if (s.num_rows > 0 && (ids[f] < 0 || ids[f] >= s.num_rows) &&
            present[f])
          __builtin_trap();
    }
  }
  if (seen_bytes > size) __builtin_trap();
  return 0;
}
