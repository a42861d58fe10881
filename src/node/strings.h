// SPDX-License-Identifier: MIT
// Strings: a call's keys or its arguments (node::Call), every string in one buffer. A lock
// cycle sends two calls of about a dozen strings each; as std::strings, most of them longer
// than the 15 bytes a std::string keeps in place, they cost an allocation each, and their
// vectors two more per call (issue 32). Here a call's keys cost one allocation, its arguments
// one, and a string can be written straight into the buffer (push_back_written).
//
// Elements are views into the buffer: valid until the Strings changes or goes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::node {

class Strings {
 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string_view;

    Iterator() = default;
    Iterator(const Strings* strings, std::size_t i) : strings_(strings), i_(i) {}
    std::string_view operator*() const { return (*strings_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++i_;
      return before;
    }
    bool operator==(const Iterator& other) const { return i_ == other.i_; }

   private:
    const Strings* strings_ = nullptr;
    std::size_t i_ = 0;
  };

  Strings() = default;
  Strings(const Strings&) = default;
  Strings& operator=(const Strings&) = default;
  // A moved-from Strings is empty (the defaults would keep its count and in-place ends beside
  // an emptied buffer).
  Strings(Strings&& other) noexcept
      : bytes_(std::move(other.bytes_)),
        size_(std::exchange(other.size_, 0)),
        inline_(other.inline_),
        heap_(std::move(other.heap_)) {
    other.bytes_.clear();
    other.heap_.clear();
  }
  Strings& operator=(Strings&& other) noexcept {
    if (this == &other) return *this;
    bytes_ = std::move(other.bytes_);
    size_ = std::exchange(other.size_, 0);
    inline_ = other.inline_;
    heap_ = std::move(other.heap_);
    other.bytes_.clear();
    other.heap_.clear();
    return *this;
  }
  Strings(std::initializer_list<std::string_view> strings) {
    for (const std::string_view s : strings) push_back(s);
  }
  // Implicit, so that a call built from a vector of strings reads as before (tests, hello_call).
  Strings(const std::vector<std::string>& strings) {  // NOLINT(google-explicit-constructor)
    for (const auto& s : strings) push_back(s);
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // The bytes of every string together: what encoding one call needs to size its buffer.
  std::size_t bytes() const noexcept { return bytes_.size(); }
  std::string_view operator[](std::size_t i) const {
    const std::size_t begin = i == 0 ? 0 : end(i - 1);
    return std::string_view(bytes_).substr(begin, end(i) - begin);
  }
  std::string_view front() const { return (*this)[0]; }
  std::string_view back() const { return (*this)[size_ - 1]; }
  Iterator begin() const { return Iterator(this, 0); }
  Iterator end() const { return Iterator(this, size_); }

  // Room for `bytes` more bytes in all: one allocation for a call whose size is known.
  void reserve(std::size_t bytes) { bytes_.reserve(bytes_.size() + bytes); }
  void push_back(std::string_view s) {
    bytes_.append(s);
    add_end();
  }
  // A new last string, written by `write(std::string& out)` appending to `out` (and nothing
  // else): a key built in place, without a std::string of its own.
  template <typename Write>
  void push_back_written(Write&& write) {
    write(bytes_);
    add_end();
  }
  // String i becomes `s` (which must not view this Strings).
  void replace(std::size_t i, std::string_view s);

  // Calls f(string) for each string in order: one pass over the ends (indexing recomputes
  // where each string begins; encoding every call of a lock cycle walks them all).
  template <typename F>
  void for_each(F&& f) const {
    std::size_t begin = 0;
    const std::string_view bytes(bytes_);
    for (std::size_t i = 0; i < size_; ++i) {
      const std::size_t e = end(i);
      f(bytes.substr(begin, e - begin));
      begin = e;
    }
  }

  std::vector<std::string> to_vector() const { return std::vector<std::string>(begin(), end()); }
  friend bool operator==(const Strings& a, const Strings& b) {
    if (a.size_ != b.size_ || a.bytes_ != b.bytes_) return false;
    for (std::size_t i = 0; i < a.size_; ++i) {
      if (a.end(i) != b.end(i)) return false;
    }
    return true;
  }

 private:
  // Where string i ends in bytes_: in place for up to kInline strings (a lock cycle's calls
  // have at most 8 keys and 7 arguments), else in heap_ (a renewal batch, a cluster's split).
  static constexpr std::size_t kInline = 8;
  std::size_t end(std::size_t i) const { return heap_.empty() ? inline_[i] : heap_[i]; }
  void set_end(std::size_t i, std::size_t at) {
    if (heap_.empty()) {
      inline_[i] = static_cast<std::uint32_t>(at);
    } else {
      heap_[i] = static_cast<std::uint32_t>(at);
    }
  }
  void add_end();
  void add_end_slow();

  std::string bytes_;
  std::size_t size_ = 0;
  std::array<std::uint32_t, kInline> inline_{};
  std::vector<std::uint32_t> heap_;
};

inline void Strings::add_end() {
  // The common case first, small enough to inline (every string of a lock cycle's calls).
  if (size_ < kInline && bytes_.size() <= UINT32_MAX) {
    inline_[size_++] = static_cast<std::uint32_t>(bytes_.size());
    return;
  }
  add_end_slow();
}

inline void Strings::add_end_slow() {
  // Ends are 32-bit: past 4 GiB they would wrap, and a string's view run past its end.
  if (bytes_.size() > UINT32_MAX)
    throw std::length_error("node::Strings: a call's strings exceed 4 GiB");
  const auto at = static_cast<std::uint32_t>(bytes_.size());
  if (heap_.empty()) heap_.assign(inline_.begin(), inline_.begin() + size_);
  heap_.push_back(at);
  ++size_;
}

inline void Strings::replace(std::size_t i, std::string_view s) {
  const std::size_t begin = i == 0 ? 0 : end(i - 1);
  const std::size_t old_size = end(i) - begin;
  if (bytes_.size() - old_size + s.size() > UINT32_MAX) {
    throw std::length_error("node::Strings: a call's strings exceed 4 GiB");
  }
  bytes_.replace(begin, old_size, s);
  for (std::size_t j = i; j < size_; ++j) set_end(j, end(j) + s.size() - old_size);
}

}  // namespace dlock::node
