// The options registry: every tunable has a name, a type, a default, a doc
// string and an environment override HB_<NAME>. A context holds its own
// copy, so two contexts in one process can differ.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace hb {

enum class OptionType { kInt, kDouble, kBool, kString, kEnum };

struct OptionSpec {
  const char *name;           // lower_snake_case; env is HB_ + upper case
  OptionType type;
  const char *default_value;  // as a string, valid for the type
  const char *enum_values;    // kEnum: "a|b|c"; else nullptr
  int64_t min;                // kInt: inclusive bounds
  int64_t max;
  const char *doc;
};

// The whole table, in documentation order (src/context/option_table.cc).
const std::vector<OptionSpec> &option_table();
const OptionSpec *find_option(const std::string &name);

class Options {
 public:
  // Defaults, then HB_<NAME> environment overrides. A malformed environment
  // value throws HB_ERR_CONFIG naming the variable and the value.
  static Options from_environment();

  Options(const Options &other);
  Options &operator=(const Options &other);

  // Type-checked; an unknown name or bad value throws HB_ERR_CONFIG.
  void set(const std::string &name, const std::string &value);
  // "name=value,name=value"; throws HB_ERR_CONFIG naming the bad entry.
  void apply_list(const std::string &list);

  std::string get(const std::string &name) const;  // canonical string
  // Like get_int etc.; throws HB_ERR_INTERNAL if name is not of that type.
  int64_t get_int(const std::string &name) const;
  double get_double(const std::string &name) const;
  bool get_bool(const std::string &name) const;
  std::string get_string(const std::string &name) const;

 private:
  Options() = default;
  // Checks value against the option's type; returns its canonical string.
  // `what` names the source in the message ("HB_TIMEOUT_MS", "option x").
  static std::string canonical(const OptionSpec &spec, const std::string &value,
                               const std::string &what);
  // Stores an already checked value and applies side effects (log_level).
  void commit(const OptionSpec &spec, const std::string &canonical_value);
  std::string raw(const std::string &name, const char *type_wanted) const;

  mutable std::mutex mu_;
  std::map<std::string, std::string> values_;  // canonical strings
};

// The environment variable of an option: "timeout_ms" -> "HB_TIMEOUT_MS".
std::string env_name(const std::string &option);

// Parsers shared by the options and the cluster discovery. `what` names the
// source in the HB_ERR_CONFIG message: "HB_RANK='x': not an integer".
// Surrounding blanks are ignored; anything else extra is an error.
int64_t parse_int(const std::string &text, const std::string &what, int64_t min,
                  int64_t max);
double parse_double(const std::string &text, const std::string &what);
// 1/0, true/false, yes/no, on/off (any case).
bool parse_bool(const std::string &text, const std::string &what);
// The value as it goes into a message: quoted, cut to a readable length.
std::string quote_value(const std::string &value);

}  // namespace hb
