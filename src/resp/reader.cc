// SPDX-License-Identifier: MIT
#include "resp/reader.h"

#include <hiredis/hiredis.h>

#include <new>

namespace dlock::resp {
namespace {

// The Reply a read task fills: the reply being built for the outermost one, else its element
// in the parent array (sized when the array was created, so it never moves meanwhile).
Reply* target(const redisReadTask* task) {
  if (task->parent == nullptr) {
    auto* root = &static_cast<Reader::Building*>(task->privdata)->root;
    *root = Reply{};
    return root;
  }
  return &static_cast<Reply*>(task->parent->obj)->elements[static_cast<std::size_t>(task->idx)];
}

void* create_string(const redisReadTask* task, char* str, std::size_t len) {
  Reply* r = target(task);
  r->type = task->type == REDIS_REPLY_ERROR    ? Reply::Type::error
            : task->type == REDIS_REPLY_STATUS ? Reply::Type::status
                                               : Reply::Type::string;
  r->str.assign(str, len);
  return r;
}

// hiredis 0.14 trusts the element count of an array header and allocates for it at once, so
// a broken or hostile server could make us allocate gigabytes with a dozen bytes
// ("*444444445\r\n", found by reply_fuzz). hiredis 1.x caps this (maxelements); here the
// budget does: at most kMaxElementsPerReply elements in one reply, all its arrays together.
// Our largest real reply has a few hundred.
void* create_array(const redisReadTask* task, int elements) {
  auto* building = static_cast<Reader::Building*>(task->privdata);
  if (elements < 0 || building == nullptr || building->element_budget < elements) return nullptr;
  building->element_budget -= elements;
  Reply* r = target(task);
  r->type = Reply::Type::array;
  r->elements.resize(static_cast<std::size_t>(elements));
  return r;
}

void* create_integer(const redisReadTask* task, long long value) {
  Reply* r = target(task);
  r->type = Reply::Type::integer;
  r->integer = value;
  return r;
}

void* create_nil(const redisReadTask* task) {
  Reply* r = target(task);
  r->type = Reply::Type::nil;
  return r;
}

// hiredis frees only the outermost object (a reply abandoned by an error, or left at the end):
// it is the Reader's own, and its elements go with it.
void free_object(void* reply) {
  *static_cast<Reply*>(reply) = Reply{};
}

redisReplyObjectFunctions functions{create_string, create_array, create_integer, create_nil,
                                    free_object};

}  // namespace

Reader::Reader() : reader_(redisReaderCreateWithFunctions(&functions)) {
  if (reader_ == nullptr) throw std::bad_alloc();
  reader_->privdata = &building_;
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
  // Every byte fed has been parsed (hiredis' cursor is at the end of its buffer): nothing can
  // come out. Asked after each read and each write, a lock cycle finds it so six times out of
  // eight, and hiredis would walk its parse state to say so (issue 32).
  if (!error_.empty() || reader_->pos >= reader_->len) return std::nullopt;
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    error_ = building_.element_budget < 0 || reader_->err == REDIS_ERR_OOM
                 ? "reply too large (over " + std::to_string(kMaxElementsPerReply) + " elements)"
                 : (reader_->errstr[0] != '\0' ? reader_->errstr : "protocol error");
    return std::nullopt;
  }
  if (raw == nullptr) return std::nullopt;
  building_.element_budget = kMaxElementsPerReply;  // the next reply starts with a full budget
  // raw is building_.root: hiredis is done with it until the next reply starts.
  return std::move(*static_cast<Reply*>(raw));
}

}  // namespace dlock::resp
