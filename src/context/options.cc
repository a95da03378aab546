#include "context/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "abi/error.h"
#include "common/log.h"
#include "hb.h"

namespace hb {
namespace {

// String options carry addresses and tokens; anything longer is a mistake
// (or hostile) and would only bloat messages and frames.
constexpr size_t kMaxStringOption = 4096;

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string trim(const std::string &s) {
  size_t b = 0, e = s.size();
  while (b < e && is_blank(s[b])) ++b;
  while (e > b && is_blank(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char &c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// "a|b|c" contains word?
bool enum_has(const char *values, const std::string &word) {
  const char *p = values;
  while (*p) {
    const char *bar = std::strchr(p, '|');
    size_t n = bar ? static_cast<size_t>(bar - p) : std::strlen(p);
    if (word.size() == n && word.compare(0, n, p, n) == 0) return true;
    if (!bar) break;
    p = bar + 1;
  }
  return false;
}

LogLevel log_level_from(const std::string &name) {
  if (name == "error") return LogLevel::kError;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  return LogLevel::kWarn;
}

const char *type_name(OptionType t) {
  switch (t) {
    case OptionType::kInt:
      return "int";
    case OptionType::kDouble:
      return "double";
    case OptionType::kBool:
      return "bool";
    case OptionType::kString:
      return "string";
    case OptionType::kEnum:
      return "enum";
  }
  return "?";
}

const OptionSpec &require_option(const std::string &name) {
  const OptionSpec *spec = find_option(name);
  if (!spec)
    fail(HB_ERR_CONFIG, "unknown option %s (hb_option_describe lists them)",
         quote_value(name).c_str());
  return *spec;
}

}  // namespace

std::string quote_value(const std::string &value) {
  constexpr size_t kShown = 64;
  if (value.size() <= kShown) return "'" + value + "'";
  return format("'%s...' (%zu bytes)", value.substr(0, kShown).c_str(),
                value.size());
}

std::string env_name(const std::string &option) {
  std::string env = "HB_";
  for (char c : option)
    env += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return env;
}

int64_t parse_int(const std::string &text, const std::string &what, int64_t min,
                  int64_t max) {
  std::string t = trim(text);
  size_t i = (!t.empty() && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
  bool digits = i < t.size();
  for (size_t k = i; k < t.size(); ++k)
    if (t[k] < '0' || t[k] > '9') digits = false;
  if (!digits)
    fail(HB_ERR_CONFIG, "%s=%s: not an integer", what.c_str(),
         quote_value(text).c_str());
  errno = 0;
  long long v = std::strtoll(t.c_str(), nullptr, 10);
  if (errno == ERANGE || v < min || v > max)
    fail(HB_ERR_CONFIG, "%s=%s: out of range [%lld, %lld]", what.c_str(),
         quote_value(text).c_str(), static_cast<long long>(min),
         static_cast<long long>(max));
  return v;
}

double parse_double(const std::string &text, const std::string &what) {
  std::string t = trim(text);
  // strtod also takes hex, "inf" and "nan": only plain decimals are values.
  bool plain = !t.empty();
  for (char c : t)
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' ||
          c == 'e' || c == 'E'))
      plain = false;
  char *end = nullptr;
  errno = 0;
  double v = plain ? std::strtod(t.c_str(), &end) : 0.0;
  if (!plain || end != t.c_str() + t.size())
    fail(HB_ERR_CONFIG, "%s=%s: not a number", what.c_str(),
         quote_value(text).c_str());
  if (errno == ERANGE || !std::isfinite(v))
    fail(HB_ERR_CONFIG, "%s=%s: out of the range of a double", what.c_str(),
         quote_value(text).c_str());
  return v;
}

bool parse_bool(const std::string &text, const std::string &what) {
  std::string t = lower(trim(text));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  fail(HB_ERR_CONFIG,
       "%s=%s: not a boolean (use 1/0, true/false, yes/no or on/off)",
       what.c_str(), quote_value(text).c_str());
}

std::string Options::canonical(const OptionSpec &spec, const std::string &value,
                               const std::string &what) {
  switch (spec.type) {
    case OptionType::kInt:
      return std::to_string(parse_int(value, what, spec.min, spec.max));
    case OptionType::kDouble:
      return format("%.17g", parse_double(value, what));
    case OptionType::kBool:
      return parse_bool(value, what) ? "true" : "false";
    case OptionType::kEnum: {
      std::string v = lower(trim(value));
      if (!enum_has(spec.enum_values, v))
        fail(HB_ERR_CONFIG, "%s=%s: not one of %s", what.c_str(),
             quote_value(value).c_str(), spec.enum_values);
      return v;
    }
    case OptionType::kString:
      if (value.size() > kMaxStringOption)
        fail(HB_ERR_CONFIG, "%s=%s: longer than %zu bytes", what.c_str(),
             quote_value(value).c_str(), kMaxStringOption);
      return value;
  }
  fail(HB_ERR_INTERNAL, "option %s has an unknown type", spec.name);
}

Options Options::from_environment() {
  Options o;
  for (const OptionSpec &spec : option_table()) {
    o.values_[spec.name] = spec.default_value;
    std::string env = env_name(spec.name);
    const char *v = std::getenv(env.c_str());
    // An empty variable counts as unset (`HB_X= prog` is how shells unset).
    if (v && *v) o.commit(spec, canonical(spec, v, env));
  }
  return o;
}

Options::Options(const Options &other) {
  std::lock_guard<std::mutex> lock(other.mu_);
  values_ = other.values_;
}

Options &Options::operator=(const Options &other) {
  if (this == &other) return *this;
  std::map<std::string, std::string> copy;
  {
    std::lock_guard<std::mutex> lock(other.mu_);
    copy = other.values_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  values_ = std::move(copy);
  return *this;
}

void Options::commit(const OptionSpec &spec,
                     const std::string &canonical_value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[spec.name] = canonical_value;
  }
  // The log level is process-wide: the last option set wins.
  if (std::strcmp(spec.name, "log_level") == 0)
    set_log_level(log_level_from(canonical_value));
}

void Options::set(const std::string &name, const std::string &value) {
  const OptionSpec &spec = require_option(name);
  commit(spec, canonical(spec, value, "option " + name));
}

void Options::apply_list(const std::string &list) {
  // Check every entry before changing anything: a bad list changes nothing.
  std::vector<std::pair<const OptionSpec *, std::string>> checked;
  size_t begin = 0, index = 0;
  while (begin <= list.size()) {
    size_t comma = list.find(',', begin);
    if (comma == std::string::npos) comma = list.size();
    std::string entry = trim(list.substr(begin, comma - begin));
    begin = comma + 1;
    ++index;
    if (entry.empty()) continue;  // "a=1,,b=2" and a trailing comma are fine
    size_t eq = entry.find('=');
    if (eq == std::string::npos)
      fail(HB_ERR_CONFIG, "options list entry %zu %s: expected name=value",
           index, quote_value(entry).c_str());
    std::string name = trim(entry.substr(0, eq));
    std::string value = trim(entry.substr(eq + 1));
    const OptionSpec &spec = require_option(name);
    checked.emplace_back(&spec, canonical(spec, value, "option " + name));
  }
  for (const auto &c : checked) commit(*c.first, c.second);
}

std::string Options::get(const std::string &name) const {
  const OptionSpec &spec = require_option(name);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(spec.name);
  return it != values_.end() ? it->second : spec.default_value;
}

std::string Options::raw(const std::string &name,
                         const char *type_wanted) const {
  const OptionSpec &spec = require_option(name);
  if (std::strcmp(type_name(spec.type), type_wanted) != 0 &&
      !(spec.type == OptionType::kEnum &&
        std::strcmp(type_wanted, "string") == 0))
    fail(HB_ERR_INTERNAL, "option %s is of type %s, read as %s", spec.name,
         type_name(spec.type), type_wanted);
  return get(name);
}

int64_t Options::get_int(const std::string &name) const {
  return parse_int(raw(name, "int"), "option " + name, INT64_MIN, INT64_MAX);
}

double Options::get_double(const std::string &name) const {
  return parse_double(raw(name, "double"), "option " + name);
}

bool Options::get_bool(const std::string &name) const {
  return raw(name, "bool") == "true";
}

std::string Options::get_string(const std::string &name) const {
  return raw(name, "string");
}

}  // namespace hb

extern "C" hb_status hb_option_describe(size_t index, const char **name,
                                        const char **type,
                                        const char **default_value,
                                        const char **doc) {
  return hb::guard([&] {
    const auto &table = hb::option_table();
    HB_CHECK_ARG(index < table.size(),
                 "hb_option_describe: index %zu past the last option (%zu)",
                 index, table.size() - 1);
    // "enum(a|b|c)" strings must be static: built once for the whole table.
    static const std::vector<std::string> types = [&] {
      std::vector<std::string> t;
      for (const auto &spec : table)
        t.push_back(spec.type == hb::OptionType::kEnum
                        ? std::string("enum(") + spec.enum_values + ")"
                        : hb::type_name(spec.type));
      return t;
    }();
    const hb::OptionSpec &spec = table[index];
    if (name) *name = spec.name;
    if (type) *type = types[index].c_str();
    if (default_value) *default_value = spec.default_value;
    if (doc) *doc = spec.doc;
  });
}
