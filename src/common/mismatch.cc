#include "common/mismatch.h"

#include <cstdlib>
#include <cstring>
#include <map>

#include "abi/error.h"
#include "common/fnv.h"

namespace hb {

namespace {

// "rank 2" / "ranks 0,1,5" / "ranks 0-7,9" (runs of three or more).
std::string rank_list(const std::vector<int> &ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j < i + 2) j = i;
    s += format("%s%d", s.empty() ? "" : ",", ranks[i]);
    if (j > i) s += format("-%d", ranks[j]);
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + s;
}

std::string differ_phrase(const std::vector<int> &ranks) {
  if (ranks.empty()) return "";
  return rank_list(ranks) + (ranks.size() == 1 ? " differs" : " differ");
}

void put_u32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void put_str(std::string &out, const std::string &s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

}  // namespace

void check_same_calls(
    const int64_t *rows, int w, int stride, int first, int n, const char *what,
    const std::function<std::string(const int64_t *)> &describe) {
  auto same = [&](int p) {
    for (int i = first; i < first + n; ++i)
      if (rows[i] != rows[static_cast<size_t>(p) * stride + i]) return false;
    return true;
  };
  std::vector<int> differ;
  for (int p = 1; p < w; ++p)
    if (!same(p)) differ.push_back(p);
  if (differ.empty()) return;
  std::string calls;
  for (int p = 0; p < w; ++p)
    calls += format("%srank %d: %s", p ? "; " : "", p,
                    describe(rows + static_cast<size_t>(p) * stride).c_str());
  fail(HB_ERR_MISMATCH,
       "%s: ranks made mismatched collective calls (%s from rank 0): %s", what,
       differ_phrase(differ).c_str(), calls.c_str());
}

void ConfigFields::add(const std::string &name, const std::string &value,
                       const std::string &label) {
  fields_.push_back({name, value, label.empty() ? name : label, false});
}

void ConfigFields::add(const std::string &name, int64_t value) {
  add(name, format("%lld", static_cast<long long>(value)));
}

void ConfigFields::add_real(const std::string &name, double value) {
  // The shortest of %.15g, %.16g, %.17g that reads back as value.
  std::string s;
  for (int digits = 15; digits <= 17; ++digits) {
    s = format("%.*g", digits, value);
    if (std::strtod(s.c_str(), nullptr) == value) break;
  }
  add(name, s);
}

void ConfigFields::add_hash(const std::string &name, uint64_t value) {
  fields_.push_back({name,
                     format("%016llx", static_cast<unsigned long long>(value)),
                     name, true});
}

std::string ConfigFields::encode() const {
  std::string out;
  put_u32(out, static_cast<uint32_t>(fields_.size()));
  for (const Field &f : fields_) {
    out.push_back(f.hash ? 1 : 0);
    put_str(out, f.name);
    put_str(out, f.value);
    put_str(out, f.label);
  }
  return out;
}

uint64_t ConfigFields::fingerprint() const {
  std::string e = encode();
  return fnv1a64(e.data(), e.size());
}

ConfigFields ConfigFields::decode(const std::string &bytes,
                                  const char *source) {
  size_t at = 0;
  auto u32 = [&]() -> uint32_t {
    if (bytes.size() - at < 4)
      fail(HB_ERR_CORRUPT, "%s: configuration description ends at byte %zu",
           source, at);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i]))
           << (8 * i);
    at += 4;
    return v;
  };
  auto str = [&]() {
    uint32_t n = u32();
    if (bytes.size() - at < n)
      fail(HB_ERR_CORRUPT,
           "%s: configuration description: a %u-byte string at byte %zu of "
           "%zu",
           source, n, at, bytes.size());
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  };
  ConfigFields c;
  uint32_t n = u32();
  for (uint32_t i = 0; i < n; ++i) {
    if (at >= bytes.size())
      fail(HB_ERR_CORRUPT, "%s: configuration description ends at byte %zu",
           source, at);
    Field f;
    f.hash = bytes[at++] != 0;
    f.name = str();
    f.value = str();
    f.label = str();
    c.fields_.push_back(std::move(f));
  }
  if (at != bytes.size())
    fail(HB_ERR_CORRUPT,
         "%s: configuration description has %zu bytes after its end", source,
         bytes.size() - at);
  return c;
}

std::string describe_differences(const std::vector<ConfigFields> &ranks,
                                 size_t max_fields) {
  // Field names in the order of rank 0's, then what only others have.
  std::vector<std::string> names;
  std::map<std::string, const ConfigFields::Field *> first;
  for (const ConfigFields &r : ranks)
    for (const ConfigFields::Field &f : r.fields())
      if (first.emplace(f.name, &f).second) names.push_back(f.name);
  std::vector<std::string> named, hashed;
  for (const std::string &name : names) {
    // Each distinct value with the ranks that hold it, by first rank.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (size_t p = 0; p < ranks.size(); ++p) {
      std::string v = "(none)";
      for (const ConfigFields::Field &f : ranks[p].fields())
        if (f.name == name) v = f.value;
      size_t g = 0;
      while (g < groups.size() && groups[g].first != v) ++g;
      if (g == groups.size()) groups.push_back({v, {}});
      groups[g].second.push_back(static_cast<int>(p));
    }
    if (groups.size() < 2) continue;
    std::string d = first[name]->label + ": ";
    for (size_t g = 0; g < groups.size(); ++g)
      d += format("%s%s (%s)", g ? " vs " : "", groups[g].first.c_str(),
                  rank_list(groups[g].second).c_str());
    (first[name]->hash ? hashed : named).push_back(d);
  }
  const std::vector<std::string> &shown = named.empty() ? hashed : named;
  std::string out;
  for (size_t i = 0; i < shown.size() && i < max_fields; ++i)
    out += (i ? "; " : "") + shown[i];
  if (shown.size() > max_fields)
    out += format("; and %zu more fields", shown.size() - max_fields);
  return out;
}

std::string differing_ranks(const std::vector<uint64_t> &prints) {
  std::vector<int> differ;
  for (size_t p = 1; p < prints.size(); ++p)
    if (prints[p] != prints[0]) differ.push_back(static_cast<int>(p));
  return differ_phrase(differ);
}

void check_same_fields(const ConfigFields &mine,
                       const std::vector<uint64_t> &prints,
                       const GatherBytes &gather, hb_status status,
                       const std::string &what, const char *noun) {
  std::string differ = differing_ranks(prints);
  if (differ.empty()) return;
  std::vector<std::string> bytes = gather(mine.encode());
  std::vector<ConfigFields> all;
  for (size_t p = 0; p < bytes.size(); ++p)
    all.push_back(
        ConfigFields::decode(bytes[p], format("rank %zu", p).c_str()));
  std::string d = describe_differences(all);
  // Equal fields with different prints: a bug, but still name the ranks.
  if (d.empty()) d = "no field differs (different fingerprints)";
  fail(status, "%s: ranks passed different %s (%s from rank 0): %s",
       what.c_str(), noun, differ.c_str(), d.c_str());
}

}  // namespace hb
