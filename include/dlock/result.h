// SPDX-License-Identifier: MIT
// dlock/result.h: Result<T>, the value-or-Error every fallible dlock call returns.
//
// Result<T> follows std::expected's member names (has_value, value, error, operator*, ->), so a
// move to C++23 is a rename. Error carries a code, a message, and for multi-node operations one
// entry per node that failed, so a caller (or the CLI) can say which node failed and why.
//
//   dlock::Result<dlock::Lease> lease = client.try_lock("jobs/nightly", opts);
//   if (!lease) std::cerr << lease.error().message() << "\n";
//   auto token = client.lock("jobs/nightly", 5s).and_then([](dlock::Lease l) {
//     auto t = l.fencing_token();
//     return l.unlock().transform([t] { return t; });
//   });  // the first error of either step, or the token
//
// Thread-safety: plain values; no sharing.
#pragma once

#include <dlock/errc.h>

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace dlock {

// What one node said when an operation did not succeed there.
struct NodeError {
  std::string node;  // the node's address as the user gave it (password elided)
  std::error_code code;
  std::string reason;  // e.g. "connection refused", "WRONGPASS invalid username-password pair"
};

class Error {
 public:
  Error() = default;
  Error(std::error_code code, std::string message, std::vector<NodeError> nodes = {})
      : code_(code), message_(std::move(message)), nodes_(std::move(nodes)) {}
  Error(errc code, std::string message, std::vector<NodeError> nodes = {})
      : Error(make_error_code(code), std::move(message), std::move(nodes)) {}

  const std::error_code& code() const noexcept { return code_; }
  // One line for people: the summary followed by each failing node and its reason.
  std::string message() const;
  const std::string& summary() const noexcept { return message_; }
  const std::vector<NodeError>& nodes() const noexcept { return nodes_; }

  bool is(errc e) const noexcept { return code_ == make_error_code(e); }

  // A lock refused because another owner holds it (lock_held, or wait_timeout after a wait):
  // how long that holder's lease still had on the nodes that refused (the longest of them),
  // when they said. A hint for when to come back, read from the
  // refusal itself: no further call. Empty for other errors, for a key that never expires, and
  // for a semaphore's refusals.
  const std::optional<std::chrono::milliseconds>& holder_ttl() const noexcept {
    return holder_ttl_;
  }
  void set_holder_ttl(std::optional<std::chrono::milliseconds> ttl) noexcept { holder_ttl_ = ttl; }

 private:
  std::error_code code_;
  std::string message_;
  std::vector<NodeError> nodes_;
  std::optional<std::chrono::milliseconds> holder_ttl_;
};

// Thrown only by throw_if_error(), Result::value() on an error, and the std::Lockable
// adapters. A std::system_error: code() is the Error's code (dlock's category, or the system's
// for I/O), so `catch (const std::system_error& e)` and `e.code() == dlock::errc::lock_held`
// work; what() is Error::message() (as before: no category text appended), error() has the
// per-node details.
class Exception : public std::system_error {
 public:
  explicit Exception(Error error)
      : std::system_error(error.code()), what_(error.message()), error_(std::move(error)) {}
  const Error& error() const noexcept { return error_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
  Error error_;
};

template <typename T>
class Result;

namespace detail {
template <typename R>
struct is_result : std::false_type {};
template <typename T>
struct is_result<Result<T>> : std::true_type {};
// and_then's and or_else's function must return a Result (std::expected requires the same): a
// void function would otherwise compile and drop the error.
template <typename R>
inline constexpr bool returns_result = is_result<std::remove_cvref_t<R>>::value;
}  // namespace detail

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & {
    check();
    return std::get<0>(v_);
  }
  const T& value() const& {
    check();
    return std::get<0>(v_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // As std::expected (C++23). value_or: the value, or `fallback` implicitly converted to T.
  template <typename U>
  T value_or(U&& fallback) const& {
    static_assert(std::is_convertible_v<U&&, T>, "value_or: the fallback must convert to T");
    if (has_value()) return std::get<0>(v_);
    return std::forward<U>(fallback);
  }
  template <typename U>
  T value_or(U&& fallback) && {
    static_assert(std::is_convertible_v<U&&, T>, "value_or: the fallback must convert to T");
    if (has_value()) return std::get<0>(std::move(v_));
    return std::forward<U>(fallback);
  }
  // and_then: f(value) -> Result<U>, or this error. transform: Result<f(value)>, or this error.
  // or_else: this value, or f(error) -> Result<T>. Each runs f only on its own branch, and
  // passes the value as this Result is held (T&, const T&, T&&), as std::expected does.
  template <typename F>
  auto and_then(F&& f) & {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <typename F>
  auto and_then(F&& f) const& {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <typename F>
  auto and_then(F&& f) && {
    return and_then_impl(std::move(*this), std::forward<F>(f));
  }
  template <typename F>
  auto transform(F&& f) & {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <typename F>
  auto transform(F&& f) const& {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <typename F>
  auto transform(F&& f) && {
    return transform_impl(std::move(*this), std::forward<F>(f));
  }
  template <typename F>
  Result or_else(F&& f) const& {
    using R = std::invoke_result_t<F, const Error&>;
    static_assert(std::is_same_v<std::remove_cvref_t<R>, Result>,
                  "or_else: the function must return this Result type");
    return has_value() ? Result(std::get<0>(v_)) : std::invoke(std::forward<F>(f), std::get<1>(v_));
  }
  template <typename F>
  Result or_else(F&& f) && {
    using R = std::invoke_result_t<F, Error&&>;
    static_assert(std::is_same_v<std::remove_cvref_t<R>, Result>,
                  "or_else: the function must return this Result type");
    return has_value() ? Result(std::get<0>(std::move(v_)))
                       : std::invoke(std::forward<F>(f), std::get<1>(std::move(v_)));
  }

 private:
  template <typename Self, typename F>
  static auto and_then_impl(Self&& self, F&& f) {
    using V = decltype(std::get<0>(std::forward<Self>(self).v_));
    using R = std::remove_cvref_t<std::invoke_result_t<F, V>>;
    static_assert(detail::returns_result<R>, "and_then: the function must return a dlock::Result");
    if (!self.has_value()) return R(std::get<1>(std::forward<Self>(self).v_));
    return R(std::invoke(std::forward<F>(f), std::get<0>(std::forward<Self>(self).v_)));
  }
  template <typename Self, typename F>
  static auto transform_impl(Self&& self, F&& f) {
    using V = decltype(std::get<0>(std::forward<Self>(self).v_));
    using U = std::remove_cvref_t<std::invoke_result_t<F, V>>;
    if (!self.has_value()) return Result<U>(std::get<1>(std::forward<Self>(self).v_));
    if constexpr (std::is_void_v<U>) {
      std::invoke(std::forward<F>(f), std::get<0>(std::forward<Self>(self).v_));
      return Result<U>();
    } else {
      return Result<U>(std::invoke(std::forward<F>(f), std::get<0>(std::forward<Self>(self).v_)));
    }
  }
  void check() const {
    if (!has_value()) throw Exception(std::get<1>(v_));
  }
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool has_value() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  void value() const {
    if (error_) throw Exception(*error_);
  }
  const Error& error() const& { return *error_; }
  Error&& error() && { return std::move(*error_); }

  // As std::expected<void, E>: and_then: f() -> Result<U>, or this error; transform:
  // Result<f()>, or this error; or_else: success, or f(error) -> Result<void>.
  template <typename F>
  auto and_then(F&& f) const {
    using R = std::remove_cvref_t<std::invoke_result_t<F>>;
    static_assert(detail::returns_result<R>, "and_then: the function must return a dlock::Result");
    return has_value() ? R(std::invoke(std::forward<F>(f))) : R(*error_);
  }
  template <typename F>
  auto transform(F&& f) const {
    using U = std::remove_cvref_t<std::invoke_result_t<F>>;
    if (!has_value()) return Result<U>(*error_);
    if constexpr (std::is_void_v<U>) {
      std::invoke(std::forward<F>(f));
      return Result<U>();
    } else {
      return Result<U>(std::invoke(std::forward<F>(f)));
    }
  }
  template <typename F>
  Result or_else(F&& f) const& {
    static_assert(
        std::is_same_v<std::remove_cvref_t<std::invoke_result_t<F, const Error&>>, Result>,
        "or_else: the function must return Result<void>");
    return has_value() ? Result() : std::invoke(std::forward<F>(f), *error_);
  }
  template <typename F>
  Result or_else(F&& f) && {
    static_assert(std::is_same_v<std::remove_cvref_t<std::invoke_result_t<F, Error&&>>, Result>,
                  "or_else: the function must return Result<void>");
    return has_value() ? Result() : std::invoke(std::forward<F>(f), std::move(*error_));
  }

 private:
  std::optional<Error> error_;
};

// For callers who prefer exceptions: throws dlock::Exception when `r` holds an error.
template <typename T>
decltype(auto) throw_if_error(Result<T>&& r) {
  if (!r.has_value()) throw Exception(std::move(r).error());
  if constexpr (!std::is_void_v<T>) return std::move(r).value();
}

}  // namespace dlock
