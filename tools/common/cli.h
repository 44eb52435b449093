// Command-line reading that thd's tools share (thdrun, thd-worker): a table of
// the options a tool accepts, a reader that takes them off the arguments one at
// a time, and parsers for their values. Every error is a thd::ValueError whose
// message names the argument that is wrong and why; the tools print it with
// their usage line and exit 2.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "tensor/check.h"

namespace thd::cli {

// The options every tool takes besides its own: -h/--help and -V/--version. Each
// answers the command line by itself, whatever follows it.
enum class Builtin { Help, Version };
std::optional<Builtin> builtin_named(std::string_view name);

// One spelling of an option. Aliases ("-n", "--nproc") share an id, and count as
// one option when checking that nothing is given twice.
template <typename Id>
struct OptionSpec {
  Id id;
  std::string_view name;  // as written on the command line
  bool takes_value;
};

// What an argument that is not an option means to a tool.
enum class Operands {
  Reject,  // a mistake: "unexpected argument 'x'"
  End,     // the first one, or whatever follows "--", ends the options (thdrun's program)
};

struct ReadRules {
  Operands operands = Operands::Reject;
  // "-nVALUE" is "-n VALUE" (and "-hx" gives "-h" a value it does not take).
  bool short_values = false;
};

// An argument split into the option's name and the value written into it
// ("--name=value"; "-nVALUE" under short_values), if any.
struct SplitArgument {
  std::string_view name;
  std::optional<std::string_view> inline_value;
};
SplitArgument split_argument(std::string_view arg, bool short_values);

// What an argument is under `rules`: an option to look up, the "--" after which
// the operands start, or the first operand.
enum class ArgumentKind { Option, EndOfOptions, Operand };
ArgumentKind kind_of(std::string_view arg, const ReadRules& rules);

// Reads options off `args` in order, checking each: it is one of `specs` (or a
// Builtin, which ends the reading), it is not given twice (by any spelling), and
// it has a value exactly when it takes one ("--name=value" or "--name value").
// `op` names the tool in the errors.
template <typename Id>
class OptionReader {
 public:
  struct Option {
    const OptionSpec<Id>& spec;
    std::string_view value;  // empty for an option that takes none
  };

  OptionReader(const char* op, std::span<const OptionSpec<Id>> specs, std::span<const std::string> args,
               ReadRules rules)
      : op_(op), specs_(specs), args_(args), rules_(rules) {}

  // The next option; nullopt once the options have ended.
  std::optional<Option> next() {
    if (next_ >= args_.size()) return std::nullopt;
    const std::string_view arg = args_[next_];
    switch (kind_of(arg, rules_)) {
      case ArgumentKind::Option:
        break;
      case ArgumentKind::EndOfOptions:
        return end_options(next_ + 1);
      case ArgumentKind::Operand:
        return end_options(next_);
    }
    ++next_;
    const SplitArgument split = split_argument(arg, rules_.short_values);
    if (const std::optional<Builtin> builtin = builtin_named(split.name)) {
      THD_CHECK(!split.inline_value, ValueError, op_, "option {} takes no value, got '{}'", split.name, arg);
      builtin_ = builtin;
      return end_options(args_.size());
    }
    const OptionSpec<Id>* spec = find(split.name);
    THD_CHECK(spec != nullptr, ValueError, op_, "{} '{}'",
              arg.starts_with("-") ? "unknown option" : "unexpected argument", split.name);
    THD_CHECK(seen_.insert(spec->id).second, ValueError, op_, "option {} is given twice", split.name);
    if (!spec->takes_value) {
      THD_CHECK(!split.inline_value, ValueError, op_, "option {} takes no value, got '{}'", split.name, arg);
      return Option{*spec, {}};
    }
    if (split.inline_value) return Option{*spec, *split.inline_value};
    THD_CHECK(next_ < args_.size(), ValueError, op_, "option {} needs a value", split.name);
    return Option{*spec, args_[next_++]};
  }

  // The Builtin that ended the reading, if one did.
  std::optional<Builtin> builtin() const { return builtin_; }

  // Whether an option with this id has been read.
  bool seen(Id id) const { return seen_.contains(id); }

  // The arguments after the options (the operands, under Operands::End); empty
  // until the options have ended.
  std::span<const std::string> operands() const { return args_.subspan(std::min(operands_from_, args_.size())); }

 private:
  std::nullopt_t end_options(size_t first_operand) {
    operands_from_ = first_operand;
    next_ = args_.size();
    return std::nullopt;
  }

  const OptionSpec<Id>* find(std::string_view name) const {
    for (const OptionSpec<Id>& o : specs_) {
      if (o.name == name) return &o;
    }
    return nullptr;
  }

  const char* op_;
  std::span<const OptionSpec<Id>> specs_;
  std::span<const std::string> args_;
  ReadRules rules_;
  size_t next_ = 0;
  size_t operands_from_ = SIZE_MAX;  // set once the options end
  std::set<Id> seen_;
  std::optional<Builtin> builtin_;
};

// The whole of `text` as an integer from min to max; nullopt for anything else.
std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max);

// Option `name`'s value as a whole number from min to max, else ValueError
// "NAME expects WHAT from MIN to MAX, got 'VALUE'".
int64_t parse_number(const char* op, std::string_view name, std::string_view value, int64_t min, int64_t max,
                     std::string_view what = "a number");

// Option `name`'s value as a TCP port, 1 to 65535.
uint16_t parse_port(const char* op, std::string_view name, std::string_view value);

// Option `name`'s value as seconds from 0 to max_seconds, fractions allowed
// ("0.25"), rounded to milliseconds. `example` follows the range in the error,
// e.g. " (e.g. 5 or 0.5)".
std::chrono::milliseconds parse_seconds(const char* op, std::string_view name, std::string_view value,
                                        double max_seconds, std::string_view example = "");

// Option `name`'s value as a host name or address: anything but empty.
std::string parse_host(const char* op, std::string_view name, std::string_view value);

// "HOST:PORT" or "[V6]:PORT" (the host without its brackets); port 0 stands for
// a free one, for an address to listen on.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
HostPort parse_listen_address(const char* op, std::string_view name, std::string_view value);

}  // namespace thd::cli
