// SPDX-License-Identifier: MIT
#include "sandbox_command.h"

#include <iostream>

#include "exit_codes.h"
#include "sandbox.h"
#include "service_process.h"
#include "stop_signals.h"

namespace dlock::cli {

CLI::App* add_sandbox_command(CLI::App& app, SandboxFlags& flags) {
  CLI::App* sandbox = app.add_subcommand(
      "sandbox", "Start local redis-server nodes to try dlock with (until Ctrl-C)");
  sandbox->add_option("-n,--nodes", flags.nodes,
                      "how many nodes (default 3; 1 with --cluster or --sentinel)");
  sandbox->add_option("-p,--port", flags.port,
                      "first port; the others follow (default: free ports)");
  sandbox->add_flag("--persist", flags.persist, "append-only file, fsync always (default: none)");
  auto* cluster = sandbox->add_flag(
      "--cluster", flags.cluster,
      "each node a Redis Cluster (redis-cluster://), made by redis-cli --cluster create");
  auto* sentinel = sandbox->add_flag(
      "--sentinel", flags.sentinel,
      "each node a master with replicas watched by 3 sentinels (redis-sentinel://)");
  cluster->excludes(sentinel);
  sandbox->add_option("--masters", flags.masters, "with --cluster: masters per cluster (default 3)")
      ->needs(cluster);
  sandbox->add_option("--replicas", flags.replicas,
                      "with --cluster or --sentinel: replicas per master (default 1)");
  auto* service = sandbox->add_flag(
      "--service", flags.service,
      "also start a `dlock serve` in front of the nodes (gRPC and HTTP/JSON, docs/service.md)");
  sandbox
      ->add_option("--grpc-listen", flags.grpc_listen,
                   "with --service: the service's gRPC HOST:PORT, or off (default "
                   "127.0.0.1:7700; port 0: any)")
      ->needs(service);
  sandbox
      ->add_option("--http-listen", flags.http_listen,
                   "with --service: the service's HTTP HOST:PORT, or off (default "
                   "127.0.0.1:7701; port 0: any)")
      ->needs(service);
  sandbox->footer(
      "Prints a DLOCK_REDIS=... line for the nodes (with --service also DLOCK_SERVICE_GRPC=... "
      "and DLOCK_SERVICE_HTTP=... for the service); stops them on Ctrl-C or SIGTERM and leaves "
      "no process and no file behind.\n"
      "Exit status: 0 after a clean stop, 69 if the nodes could not start (no redis-server, a "
      "port in use), 64 usage error.\n\n"
      "Examples:\n"
      "  dlock sandbox --nodes 5\n"
      "  dlock sandbox --cluster            # one cluster: 3 masters, 3 replicas\n"
      "  dlock sandbox --sentinel --nodes 3 # Redlock over 3 sentinel-managed masters\n"
      "  dlock sandbox --service            # 3 nodes and dlock serve on :7700 and :7701\n"
      "  export DLOCK_REDIS=...   # the printed line, in another terminal\n"
      "  dlock run my-job -- ./job.sh");
  return sandbox;
}

namespace {

// --service: a `dlock serve` in front of the sandbox's nodes until a stop signal, stopped
// before them. Returns 0, or the exit status when the service could not start or died.
int serve_until_stopped(sandbox::Sandbox& sandbox, const SandboxFlags& flags, StopSignals& stop) {
  auto service =
      sandbox::ServiceProcess::start(sandbox.urls(), flags.grpc_listen, flags.http_listen);
  if (!service) {
    std::cerr << "dlock: " << service.error().message() << "\n";
    return kExitUnavailable;
  }
  const std::string http = (*service)->http_address();
  if (!(*service)->grpc_address().empty()) {
    std::cout << "DLOCK_SERVICE_GRPC=" << (*service)->grpc_address() << std::endl;
  }
  if (!http.empty()) std::cout << "DLOCK_SERVICE_HTTP=http://" << http << std::endl;
  std::cerr << "dlock: " << sandbox.size() << " nodes and dlock serve up"
            << (http.empty() ? "" : "; try: curl -X POST http://" + http + "/v1/locks/demo:acquire")
            << ". Ctrl-C stops them." << std::endl;
  while (stop.wait_for(std::chrono::seconds(1)) == 0) {
    if (!(*service)->running()) {
      std::cerr << "dlock: dlock serve exited; stopping the nodes" << std::endl;
      return kExitUnavailable;
    }
  }
  return 0;  // the service stops (SIGTERM, waited for) as it goes out of scope
}

}  // namespace

int sandbox_command(SandboxFlags flags) {
  if (flags.nodes == 0) flags.nodes = flags.cluster || flags.sentinel ? 1 : 3;
  if (flags.nodes > 99) {
    std::cerr << "dlock: --nodes must be between 1 and 99\n";
    return kExitUsage;
  }
  if ((flags.cluster || flags.sentinel) && (flags.nodes > 9 || flags.port != 0 || flags.persist)) {
    std::cerr << "dlock: with --cluster or --sentinel: at most 9 nodes, free ports, no --persist\n";
    return kExitUsage;
  }
  if ((flags.cluster || flags.sentinel) && flags.replicas > 5) {
    std::cerr << "dlock: --replicas must be between 0 and 5\n";
    return kExitUsage;
  }
  if (flags.sentinel && flags.replicas == 0) {
    std::cerr << "dlock: --sentinel needs a replica to fail over to (--replicas 1 or more)\n";
    return kExitUsage;
  }
  StopSignals stop;
  auto sandbox = flags.cluster
                     ? sandbox::Sandbox::start_clusters(flags.nodes, flags.masters, flags.replicas)
                 : flags.sentinel ? sandbox::Sandbox::start_sentinels(flags.nodes, flags.replicas)
                                  : sandbox::Sandbox::start(flags.nodes, flags.port, flags.persist);
  if (!sandbox) {
    std::cerr << "dlock: " << sandbox.error().message() << "\n";
    return kExitUnavailable;
  }
  std::cout << "DLOCK_REDIS=" << (*sandbox)->url_list() << std::endl;
  if (flags.service) {
    if (int failed = serve_until_stopped(**sandbox, flags, stop)) return failed;
  } else {
    std::cerr << "dlock: " << (*sandbox)->size()
              << " nodes up; export the line above to use them. Ctrl-C stops them." << std::endl;
    while (stop.wait_for(std::chrono::seconds(3600)) == 0) {
    }
  }
  sandbox->reset();
  std::cerr << "dlock: sandbox stopped" << std::endl;
  return kExitOk;
}

}  // namespace dlock::cli
