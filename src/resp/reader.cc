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

}  // namespace

Reader::Reader() : reader_(redisReaderCreate()) {
  if (reader_ == nullptr) throw std::bad_alloc();
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
    error_ = reader_->errstr[0] != '\0' ? reader_->errstr : "protocol error";
    return std::nullopt;
  }
  if (raw == nullptr) return std::nullopt;
  auto* reply = static_cast<redisReply*>(raw);
  Reply out = convert(reply);
  freeReplyObject(reply);
  return out;
}

}  // namespace dlock::resp
