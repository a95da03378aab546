// One line of text -> one sample: label, dense values and categorical ids,
// following the Settings' column layout. No allocation; the hot loop of the
// reader (and the fuzz target's entry point).
#pragma once

#include <cstddef>
#include <cstdint>

#include "reader/settings.h"

namespace hb {
namespace reader {

struct ParseError {
  int column = 0;         // 1-based column that is wrong
  const char *what = "";  // static text: why
  int64_t fields = 0;     // for a wrong column count: fields found
};

// The id of a categorical value v under the settings (raw, or hashed into
// [0, num_rows)).
int64_t categorical_id(const Settings &s, uint64_t v);

// Parses line[0, len) (no newline; a trailing '\r' is already stripped).
// Outputs: *label (0 when there is no label column), dense[num_dense],
// ids[num_sparse] and present[num_sparse] (0: empty field, id 0).
// Returns false and fills *err on a malformed line; outputs are then
// unspecified.
bool parse_line(const Settings &s, const char *line, size_t len, float *label,
                float *dense, int64_t *ids, uint8_t *present, ParseError *err);

}  // namespace reader
}  // namespace hb
