// A strict JSON parser (RFC 8259) for the trace tests: it rejects what a lenient
// reader would let through (trailing commas, raw control characters in strings,
// invalid UTF-8, lone surrogates, leading zeros, garbage after the value), and keeps
// each number's text so tests can compare "1.500" exactly.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace thd::trace::test_json {

struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  std::string text;  // a string's decoded UTF-8, or a number's text as written
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  bool has(std::string_view key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return true;
    }
    return false;
  }
  const Json& operator[](std::string_view key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return v;
    }
    throw std::runtime_error("no member '" + std::string(key) + "'");
  }
  const std::string& str() const {
    if (type != Type::String) throw std::runtime_error("not a string");
    return text;
  }
  const std::string& num() const {
    if (type != Type::Number) throw std::runtime_error("not a number");
    return text;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  Json parse_document() {
    skip_ws();
    Json v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at byte " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void skip_ws() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail("bad literal");
    pos_ += word.size();
  }

  Json value(int depth) {
    if (depth > 64) fail("nested too deep");
    Json v;
    switch (peek()) {
      case '{': object(v, depth); break;
      case '[': array(v, depth); break;
      case '"':
        v.type = Json::Type::String;
        v.text = string();
        break;
      case 't':
        literal("true");
        v.type = Json::Type::Bool;
        v.boolean = true;
        break;
      case 'f':
        literal("false");
        v.type = Json::Type::Bool;
        break;
      case 'n': literal("null"); break;
      default: number(v);
    }
    return v;
  }

  void object(Json& v, int depth) {
    v.type = Json::Type::Object;
    expect('{');
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') fail("expected a key");
      std::string key = string();
      if (v.has(key)) fail("duplicate key '" + key + "'");
      skip_ws();
      expect(':');
      skip_ws();
      Json member = value(depth + 1);
      v.members.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return;
    }
  }

  void array(Json& v, int depth) {
    v.type = Json::Type::Array;
    expect('[');
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      v.items.push_back(value(depth + 1));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return;
    }
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  void number(Json& v) {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (is_digit(peek())) ++pos_;
    } else {
      fail("bad value");
    }
    if (peek() == '.') {
      ++pos_;
      if (!is_digit(peek())) fail("digit expected after '.'");
      while (is_digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) fail("digit expected in exponent");
      while (is_digit(peek())) ++pos_;
    }
    v.type = Json::Type::Number;
    v.text = std::string(s_.substr(start, pos_ - start));
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') cp |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') cp |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') cp |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("bad hex digit");
    }
    return cp;
  }

  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // One raw UTF-8 sequence, validated strictly, copied to out.
  void raw_utf8(std::string& out) {
    const auto b = [&](size_t k) { return k < s_.size() ? static_cast<unsigned char>(s_[k]) : 0u; };
    const unsigned c = b(pos_);
    size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      lo = c == 0xE0 ? 0xA0 : 0x80;
      hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      lo = c == 0xF0 ? 0x90 : 0x80;
      hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
      fail("invalid UTF-8 lead byte");
    }
    if (b(pos_ + 1) < lo || b(pos_ + 1) > hi) fail("invalid UTF-8");
    for (size_t k = 2; k < n; ++k) {
      if (b(pos_ + k) < 0x80 || b(pos_ + k) > 0xBF) fail("invalid UTF-8");
    }
    out.append(s_.substr(pos_, n));
    pos_ += n;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("raw control character in a string");
      if (c >= 0x80) {
        raw_utf8(out);
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") fail("lone high surrogate");
            pos_ += 2;
            const uint32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

inline Json parse_json(std::string_view text) { return JsonParser(text).parse_document(); }

}  // namespace thd::trace::test_json
