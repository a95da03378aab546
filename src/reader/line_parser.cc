#include "reader/line_parser.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace hb {
namespace reader {
namespace {

// Hex digit value, or 0xff.
struct HexTable {
  uint8_t v[256];
  constexpr HexTable() : v() {
    for (int i = 0; i < 256; ++i) v[i] = 0xff;
    for (int i = 0; i < 10; ++i) v['0' + i] = static_cast<uint8_t>(i);
    for (int i = 0; i < 6; ++i) {
      v['a' + i] = static_cast<uint8_t>(10 + i);
      v['A' + i] = static_cast<uint8_t>(10 + i);
    }
  }
};
constexpr HexTable kHex;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A decimal number in [p, end of field), the field ending at the separator
// or the end of the line; *next gets the field's end. Criteo's integer
// columns take the fast path (optional '-', at most 15 digits: exact in a
// double, one pass, no search for the separator); anything else goes
// through from_chars (locale-independent, rounded once to float), and must
// be finite and fill the field.
bool parse_number(const char *p, const char *end, char sep, double *out,
                  const char **next) {
  const char *q = p;
  bool neg = false;
  if (q < end && *q == '-') {
    neg = true;
    ++q;
  }
  const char *digits = q;
  int64_t v = 0;
  unsigned d;
  while (q < end && (d = static_cast<unsigned>(*q - '0')) < 10 &&
         q - digits < 15) {
    v = v * 10 + d;
    ++q;
  }
  if (q > digits && (q == end || *q == sep)) {
    *out = neg ? -static_cast<double>(v) : static_cast<double>(v);
    *next = q;
    return true;
  }
  const char *fend = static_cast<const char *>(
      std::memchr(q, sep, static_cast<size_t>(end - q)));
  if (!fend) fend = end;
  *next = fend;
  if (p < fend && *p == '+') ++p;  // from_chars refuses a leading '+'
  float f;
  auto r = std::from_chars(p, fend, f);
  *out = f;
  return r.ec == std::errc() && r.ptr == fend && std::isfinite(f);
}

// 1 to 16 hex digits up to the separator or the end; *next: where it stopped.
bool parse_hex(const char *p, const char *end, char sep, uint64_t *out,
               const char **next) {
  const char *q = p;
  uint64_t v = 0;
  uint8_t d;
  while (q < end && (d = kHex.v[static_cast<unsigned char>(*q)]) != 0xff) {
    v = v << 4 | d;
    ++q;
  }
  *next = q;
  *out = v;
  return q > p && q - p <= 16 && (q == end || *q == sep);
}

bool bad(ParseError *err, int column, const char *what) {
  err->column = column;
  err->what = what;
  return false;
}

}  // namespace

int64_t categorical_id(const Settings &s, uint64_t v) {
  if (s.num_rows == 0) return static_cast<int64_t>(v);
  uint64_t h = s.hash == HB_READER_HASH_MIX ? splitmix64(v) : v;
  return static_cast<int64_t>(h % static_cast<uint64_t>(s.num_rows));
}

bool parse_line(const Settings &s, const char *line, size_t len, float *label,
                float *dense, int64_t *ids, uint8_t *present, ParseError *err) {
  const char *p = line, *end = line + len;
  const char sep = s.separator;
  const size_t ncols = s.columns.size();
  *label = 0.0f;
  int d = 0, c = 0;
  bool more = true;  // a field starts at p
  for (size_t col = 0; col < ncols; ++col) {
    const int column = static_cast<int>(col) + 1;
    if (!more) {
      err->fields = static_cast<int64_t>(col);
      return bad(err, column, "too few columns");
    }
    const bool empty = p == end || *p == sep;
    const char *q = p;  // end of the field
    switch (s.columns[col]) {
      case Column::kLabel: {
        double v;
        if (empty || !parse_number(p, end, sep, &v, &q))
          return bad(err, column, "label is not a number");
        *label = static_cast<float>(v);
        break;
      }
      case Column::kDense: {
        double v = s.dense_missing;
        if (!empty && !parse_number(p, end, sep, &v, &q))
          return bad(err, column, "integer feature is not a number");
        if (s.log_dense) v = std::log1p(v > 0 ? v : 0.0);
        dense[d++] = static_cast<float>(v);
        break;
      }
      case Column::kSparse: {
        uint64_t v = 0;
        if (empty) {
          ids[c] = 0;
          present[c++] = 0;
          break;
        }
        if (!parse_hex(p, end, sep, &v, &q))
          return bad(err, column,
                     "categorical feature is not hexadecimal (1-16 digits)");
        ids[c] = categorical_id(s, v);
        present[c++] = 1;
        break;
      }
      case Column::kSkip:
        q = static_cast<const char *>(
            std::memchr(p, sep, static_cast<size_t>(end - p)));
        if (!q) q = end;
        break;
    }
    more = q < end;  // else *q == sep
    p = q + (more ? 1 : 0);
  }
  if (more) {  // fields left over: count them for the message
    int64_t fields = static_cast<int64_t>(ncols) + 1;
    for (const char *q = p; (q = static_cast<const char *>(std::memchr(
                                 q, sep, static_cast<size_t>(end - q))));
         ++q)
      ++fields;
    err->fields = fields;
    return bad(err, static_cast<int>(ncols) + 1, "too many columns");
  }
  return true;
}

}  // namespace reader
}  // namespace hb
