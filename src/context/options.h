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
  int64_t get_int(const std::string &name) const;
  double get_double(const std::string &name) const;
  bool get_bool(const std::string &name) const;
  std::string get_string(const std::string &name) const;

 private:
  Options() = default;
  mutable std::mutex mu_;
  std::map<std::string, std::string> values_;  // canonical strings
};

}  // namespace hb
