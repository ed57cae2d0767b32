// Errors: exceptions inside the library, one readable line and exit status 2 at the CLI.
// A ConfigError carries where in the user's input the problem is (file, line, column, key).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace poseidon {

// Any failure caused by the user's input (config, data, checkpoint): the CLI exits with 2.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A location in a user-supplied file. line and column are 1-based; 0 means unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key;  // dotted key path, e.g. "layers[2].kernel_size"

  std::string str() const;
};

class ConfigError : public Error {
 public:
  ConfigError(SourceLocation where, const std::string& what);
  const SourceLocation& where() const { return where_; }

 private:
  SourceLocation where_;
};

// Violated internal invariant (a bug, not bad input).
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
// Collects a streamed message and throws when destroyed (end of the full expression).
template <class E>
class Thrower {
 public:
  explicit Thrower(std::string prefix) { os_ << prefix; }
  [[noreturn]] ~Thrower() noexcept(false) { throw E(os_.str()); }
  template <class T>
  Thrower& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
};
}  // namespace detail

}  // namespace poseidon

#define POSEIDON_STR2(x) #x
#define POSEIDON_STR(x) POSEIDON_STR2(x)

// POSEIDON_CHECK(cond) << "message";   invariant of the program: throws InternalError.
#define POSEIDON_CHECK(cond) \
  if (cond) {                \
  } else                     \
    ::poseidon::detail::Thrower<::poseidon::InternalError>(__FILE__ ":" POSEIDON_STR(__LINE__) ": check failed: " #cond ": ")

// POSEIDON_REQUIRE(cond) << "message";  condition on user input: throws Error (exit 2).
#define POSEIDON_REQUIRE(cond) \
  if (cond) {                  \
  } else                       \
    ::poseidon::detail::Thrower<::poseidon::Error>("")
