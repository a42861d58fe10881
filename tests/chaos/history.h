// SPDX-License-Identifier: MIT
// The chaos runner's history and its checker. Every critical section a worker ran is one
// event; the controller adds the faults it injected. The checker reads them back and looks for:
//   (a) two holders of one name whose validity windows overlap by more than the drift;
//   (b) the fenced resource accepting a token lower than one it had accepted, or its counter
//       outside [accepted writes, accepted writes + writes whose answer never came] (per
//       resource: the async workers' names have one each, History::counters);
//   (c) a waiter that did not get the lock in time while a majority was up and no fault ran.
// A nesting worker's event (outcome "held" when it did not write) spans all the time it
// believed it held the lock through nested reentrant leases; (a) applies to it like any other.
// A reader worker's event (shared, outcome "held") may overlap other readers, never a writer.
// A permit holder's event (permits > 0, outcome "held") is one of `permits` permits of the
// semaphore `name`, held as the lock `slot`: (a) applies to each slot, and
//   (d) at no time more than `permits` holders of one semaphore are within their windows.
// Overlaps of a holder that was paused or had a skewed clock are expected (no lock service can
// prevent them); they are reported as "caught by fencing" when the stale write was refused,
// and as violations otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlock::chaos {

// One critical section, in CLOCK_MONOTONIC nanoseconds read by raw syscall (so libfaketime in
// a worker does not distort the history).
struct Event {
  std::string name;
  std::string holder;
  std::uint64_t token = 0;
  std::int64_t wait_ns = 0;         // started waiting
  std::int64_t acquire_ns = 0;      // lock() returned
  std::int64_t read_ns = 0;         // its fenced read of the resource registered its token
  std::int64_t valid_until_ns = 0;  // acquire_ns + the lease's validity then
  std::int64_t release_ns = 0;      // wrote, about to release (held: last saw a lease held)
  // The write was sent (0: none). It was accepted somewhere in [write_ns, release_ns]: only a
  // newer read that ended before write_ns surely came first.
  std::int64_t write_ns = 0;
  // "accepted" / "refused" (the fenced write), "timeout" (no lock within the wait bound),
  // "error" (no quorum or a failed write), "held" (held the lock, wrote nothing: a nesting
  // worker whose leases stopped holding, or held with too little time left to write).
  std::string outcome;
  bool paused = false;   // the holder was stopped between its read and its write
  bool skewed = false;   // the holder's clock ran at another rate (libfaketime)
  bool shared = false;   // a read hold (a reader worker): overlaps other read holds freely
  unsigned permits = 0;  // > 0: a permit of the semaphore `name` of that many permits
  std::string slot;      // a permit: the slot lock it held (dlock:sem:{NAME}:<i>)
  std::string detail;    // how a nesting worker nested its leases, and what each call returned
  // The owner its acquisition asked as (an async worker's: once acquired): names a sampled
  // hold's worker.
  std::string owner;
};

// One hold one node showed a sampler (holder_sampler.h).
struct SampledHold {
  std::size_t node = 0;  // index among the lock nodes
  bool shared = false;   // a read hold
  std::string owner;
  std::string hold;  // the hold id
  std::int64_t ttl_ms = -1;
};

// Who held `name` at at_ns, on the nodes that answered (no holds: free on all of them).
struct Sample {
  std::int64_t at_ns = 0;
  std::string name;
  std::vector<SampledHold> holds;
  std::size_t answered = 0;  // nodes that answered
};

// The kind of fault the runner records for the times a worker was kept off the CPU
// (starvation_watch.h): no fault it injected, and no excuse for anything but a failed wait.
inline constexpr const char* kStarved = "starved";
// A starved fault's target: the worker process it starved, "worker N" (N its id, as in its
// holders' names: worker-N, reader-N, permit-N, async-N.k).
std::string starved_target(int worker_id);

struct Fault {
  std::string kind;  // kill, restart-empty, restart-aof, stop-node, pause-holder, ...
  std::string target;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;  // when its effect is over (node back and voting, holder resumed)
};

struct History {
  std::vector<Event> events;
  std::vector<Fault> faults;
  std::vector<Sample> samples;
  // The final counter of the resource every name writes that `counters` does not list
  // (-1: unknown).
  std::int64_t counter = -1;
  // Names with a resource of their own (the async workers'), each with its final counter:
  // checked against that name's writes alone, as `counter` is against the others'.
  std::map<std::string, std::int64_t> counters;
  std::int64_t ttl_ms = 0;
  std::int64_t wait_bound_ms = 0;
  std::int64_t drift_ms = 0;
};

// One JSON object per line: {"event": {...}}, {"fault": {...}}, {"sample": {...}} or
// {"summary": {...}}.
std::string to_line(const Event& e);
std::string to_line(const Fault& f);
std::string to_line(const Sample& s);
std::string summary_line(const History& h);
// Reads a history file; throws std::runtime_error with the line number on a bad line.
History read_history(const std::string& path);

struct Report {
  std::size_t cycles = 0;
  std::size_t accepted = 0;
  std::size_t refused = 0;
  std::size_t timeouts = 0;
  // Writes sent whose answer never came (outcome "error" with write_ns set): each may or may
  // not have been applied, so the counter may exceed the accepted writes by up to this many.
  std::size_t unknown_writes = 0;
  std::size_t held_only = 0;  // held the lock without writing (outcome "held")
  // Waits that failed while no fault ran but workers were kept off the CPU for a tenth of
  // them or more (check (c)): excused, and counted.
  std::size_t starved_timeouts = 0;
  std::vector<std::string> excused;   // those waits, described
  std::size_t expected_overlaps = 0;  // paused or skewed holders
  std::size_t caught_by_fencing = 0;  // of those, the stale write was refused
  // Of those, accepted before any newer holder touched the resource (it then read that value).
  std::size_t harmless_late_writes = 0;
  // Holders' windows that another holder entered (each pair is a violation; one window
  // entered by many shows as many violations).
  std::size_t overlapped_windows = 0;
  std::vector<std::string> violations;
};

// A wait that ended without the lock while others took it this many times, while no fault ran,
// is a violation even if faults ran at other times during the wait: see check (c).
inline constexpr long kStarvedHandOffs = 200;
// One holder's grants of a name in a row (those while a fault ran not counted), while another
// holder waited through them, that count as barging: see check (e).
inline constexpr long kBargingRun = 100;

Report check(const History& history);

}  // namespace dlock::chaos
