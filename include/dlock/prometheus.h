// SPDX-License-Identifier: MIT
// dlock/prometheus.h: PrometheusObserver, a ready Observer that counts what a client does and
// renders it in the Prometheus text exposition format (version 0.0.4), for an application to
// serve on its /metrics endpoint. dlock opens no port of its own.
//
//   auto metrics = std::make_shared<dlock::PrometheusObserver>();
//   dlock::ClientOptions options;
//   options.observer = metrics;  // one observer may serve several clients
//   ...
//   // in the application's HTTP handler for GET /metrics:
//   //   Content-Type: text/plain; version=0.0.4
//   response.body = metrics->text();
//
// The metrics, their units and labels are listed in docs/metrics.md. Lock names are never a
// label (a label per name would grow without bound); nodes are, by URL with the password
// elided.
//
// Thread-safety: every member may be called from any thread at once.
#pragma once

#include <dlock/observer.h>

#include <memory>
#include <string>

namespace dlock {

class PrometheusObserver final : public Observer {
 public:
  PrometheusObserver();
  ~PrometheusObserver() override;
  PrometheusObserver(const PrometheusObserver&) = delete;
  PrometheusObserver& operator=(const PrometheusObserver&) = delete;

  // Everything counted so far, in the text exposition format.
  std::string text() const;

  void acquired(const AcquireEvent& e) noexcept override;
  void released(const ReleaseEvent& e) noexcept override;
  void renewed(const RenewEvent& e) noexcept override;
  void lost(const LostEvent& e) noexcept override;
  void node_request(const NodeRequestEvent& e) noexcept override;
  void quarantined(const QuarantineEvent& e) noexcept override;
  void node_health(const NodeHealthEvent& e) noexcept override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dlock
