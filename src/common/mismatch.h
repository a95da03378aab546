// Cross-rank agreement, and the messages when ranks disagree.
//
// Call signatures: each rank sends a few int64 describing the collective it
// is making (operation, configuration, sequence number, counts) in a header
// the exchange has anyway; every rank receives every rank's and so reaches
// the same verdict, naming the same ranks.
//
// Configurations (a metric's, a table's, a collection's features): each
// module describes its configuration once as named fields (ConfigFields);
// only the fields' fingerprint travels in the header. When the fingerprints
// differ every rank sees it, so every rank then exchanges its description
// (one more collective, on the error path only) and all fail with the same
// message naming each field that differs and each rank's value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hb.h"

namespace hb {

// rows: w rows of `stride` int64; fields [first, first + n) of each row are
// the signature. Throws HB_ERR_MISMATCH when any rank's signature differs
// from rank 0's: "<what>: ranks made mismatched collective calls (ranks 2,3
// differ from rank 0): rank 0: <describe(row 0)>; rank 1: ...".
void check_same_calls(
    const int64_t *rows, int w, int stride, int first, int n, const char *what,
    const std::function<std::string(const int64_t *)> &describe);

// A configuration as (name, value) pairs, in a fixed order, values as the
// text a message shows ("8", "0.25", "'clicks'", "SUM").
class ConfigFields {
 public:
  // label: how a message names the field (default: name), e.g. "feature 1
  // ('clicks') pooling" for "features[1].pooling"; fields pair up across
  // ranks by name, and the label of the lowest rank that has it is shown.
  void add(const std::string &name, const std::string &value,
           const std::string &label = "");
  void add(const std::string &name, int64_t value);
  // The shortest %g text that reads back as value: equal texts exactly
  // when the doubles are equal (NaN aside; -0 and 0 differ).
  void add_real(const std::string &name, double value);
  // Something with no name of its own (e.g. the fingerprint of a
  // structure): reported, as hex, only when no named field differs.
  void add_hash(const std::string &name, uint64_t value);

  // FNV-1a over the encoding: equal exactly when the fields are equal.
  uint64_t fingerprint() const;
  std::string encode() const;
  // Throws HB_ERR_CORRUPT (naming `source`) on malformed bytes.
  static ConfigFields decode(const std::string &bytes, const char *source);

  struct Field {
    std::string name, value, label;
    bool hash = false;
  };
  const std::vector<Field> &fields() const { return fields_; }

 private:
  std::vector<Field> fields_;
};

// "dim: 8 (ranks 0,2) vs 6 (rank 1); pooling: ..." for each field whose
// value differs between ranks (a field a rank lacks reads "(none)"), in the
// order of rank 0's fields, at most max_fields of them ("and N more
// fields"). Hash fields only when no named field differs. "" when all
// ranks agree.
std::string describe_differences(const std::vector<ConfigFields> &ranks,
                                 size_t max_fields = 8);

// "ranks 1,3 differ" / "rank 2 differs": the ranks whose prints differ from
// rank 0's; "" when none does.
std::string differing_ranks(const std::vector<uint64_t> &prints);

// Every rank's bytes in rank order, given this rank's (a collective).
using GatherBytes =
    std::function<std::vector<std::string>(const std::string &mine)>;

// prints: every rank's mine.fingerprint(), as exchanged in a header (the
// same vector on every rank). Returns at once when they are equal;
// otherwise gathers every rank's fields (collective: every rank takes this
// branch) and throws `status`: "<what>: ranks passed different <noun>
// (rank 1 differs from rank 0): <describe_differences>".
void check_same_fields(const ConfigFields &mine,
                       const std::vector<uint64_t> &prints,
                       const GatherBytes &gather, hb_status status,
                       const std::string &what, const char *noun);

}  // namespace hb
