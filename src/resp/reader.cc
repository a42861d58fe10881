// SPDX-License-Identifier: MIT
#include "resp/reader.h"

#include <hiredis/hiredis.h>

#include <new>

namespace dlock::resp {
namespace {

Reply convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::status;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::error;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::string;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::integer;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::array;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:  // REDIS_REPLY_NIL
      out.type = Reply::Type::nil;
      break;
  }
  return out;
}

// hiredis 0.14 trusts the element count of an array header and allocates for it at once, so
// a broken or hostile server could make us allocate gigabytes with a dozen bytes
// ("*444444445\r\n", found by reply_fuzz). hiredis 1.x caps this (maxelements); here a wrapper
// around hiredis' own createArray does: at most kMaxElementsPerReply elements in one reply,
// all its arrays together. Our largest real reply has a few hundred.
struct BoundedFunctions {
  BoundedFunctions() {
    redisReader* probe = redisReaderCreate();
    if (probe == nullptr) throw std::bad_alloc();
    functions = *probe->fn;  // hiredis' defaults, which build redisReply objects
    redisReaderFree(probe);
    create_array = functions.createArray;
    functions.createArray = [](const redisReadTask* task, int elements) -> void* {
      auto* budget = static_cast<long long*>(task->privdata);
      if (elements < 0 || budget == nullptr || *budget < elements) return nullptr;
      *budget -= elements;
      return instance().create_array(task, elements);
    };
  }
  static BoundedFunctions& instance() {
    static BoundedFunctions f;
    return f;
  }
  redisReplyObjectFunctions functions{};
  void* (*create_array)(const redisReadTask*, int) = nullptr;
};

}  // namespace

Reader::Reader()
    : reader_(redisReaderCreateWithFunctions(&BoundedFunctions::instance().functions)) {
  if (reader_ == nullptr) throw std::bad_alloc();
  reader_->privdata = &element_budget_;
}

Reader::~Reader() {
  redisReaderFree(reader_);
}

bool Reader::feed(std::string_view bytes) {
  if (!error_.empty()) return false;
  if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK) {
    error_ = reader_->errstr[0] != '\0' ? reader_->errstr : "reader error";
    return false;
  }
  return true;
}

std::optional<Reply> Reader::next() {
  if (!error_.empty()) return std::nullopt;
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    error_ = element_budget_ < 0 || reader_->err == REDIS_ERR_OOM
                 ? "reply too large (over " + std::to_string(kMaxElementsPerReply) + " elements)"
                 : (reader_->errstr[0] != '\0' ? reader_->errstr : "protocol error");
    return std::nullopt;
  }
  if (raw == nullptr) return std::nullopt;
  element_budget_ = kMaxElementsPerReply;  // the next reply starts with a full budget
  auto* reply = static_cast<redisReply*>(raw);
  Reply out = convert(reply);
  freeReplyObject(reply);
  return out;
}

}  // namespace dlock::resp
