# Labels for the discovered GoogleTest cases, by test name, read by ctest after the discovered
# tests are added (TEST_INCLUDE_FILES keeps their order). gtest_discover_tests (CMake 3.25)
# flattens a list-valued property, so PROPERTIES LABELS "unit;sim" would set "unit" alone:
# every case's full list is set here. scripts/test.sh picks tests per preset by these labels:
#   unit, sim          pure logic
#   integration        real redis-server processes; regression: one file per issue
#   cluster, sentinel  a Redis Cluster or a Sentinel set per test (seconds to start)
#   failover           the long failover suites (a master killed, a replica promoted)
#   slow               overload (100,000 locks), the examples (a process per example), a wait
#                      behind 12 s of greetings (Issue32HandOverTest.AWait...)
#   cpu                busy on the CPU, not waiting on servers: counts as 4 of ctest's jobs
#   one_node           the one-node run of a test that also runs on several nodes (Nodes/...
#                      /1nodes): the sanitizer builds leave it to dev (scripts/test.sh)
# COST: the long tests start first (ctest -j runs by descending cost when it has no timings
# of an earlier run, as on a fresh clone), so none of them is left alone at the end.
function(dlock_label base)
  foreach(test IN LISTS ARGN)
    set(labels ${base})
    set(cost 1)
    if(test MATCHES "^Cluster(Node|Failover|Redlock|Auth|Reshard)Test\\.")
      list(APPEND labels cluster)
      set(cost 10)
    endif()
    if(test MATCHES "Sentinel" AND base MATCHES "integration")
      list(APPEND labels sentinel)
      set(cost 10)
    endif()
    if(test MATCHES "^(ClusterFailoverTest\\.|SentinelNodeTest\\.(TheHolderKeeps|ALockTheReplicaLost|AGracefulFailover|AWaiterFollows|ALossyFailover|ATtlTheReplicaConfirmed))")
      list(APPEND labels failover)
      set(cost 30)
    endif()
    if(test MATCHES "^Nodes/.*/1nodes( |$)")
      list(APPEND labels one_node)
    endif()
    if(test MATCHES "^(OverloadTest\\.|Examples/|Issue32HandOverTest\\.AWait)")
      list(APPEND labels slow)
    endif()
    if(test MATCHES "^(ClusterNodeTest\\.ASlotResharded|Nodes/WaitingTest\\.WaiterEnteringWhileItsChannelIsDropped|Planted/SimSelfTest\\.)")
      set(cost 20)
    elseif(test MATCHES "^(Nodes/FencingRedlockTest\\.(DlockRun|Thousand)|CliProcessesTest\\.SixProcesses)")
      set(cost 40)  # 35 to 60 s in the dev build, up to 45 s under TSan (measured 2026-11-30)
    elseif(test MATCHES "^(Holds/RetractionOfEveryHoldTest\\.|Nodes/AsyncTest\\.TheLastCopyOfAClient|Nodes/GroupCommitAsyncTest\\.ManyInFlight|TlsTest\\.|OpsTest\\.(SandboxOfSentinel|DemoRuns)|Managed(Failover|Timeout|Oom)Test\\.|Issue28FencingTest\\.AGreeting|Issue32HandOverTest\\.AWait|CliTest\\.(PermitsLetN|SharedRuns|AcquirePrints))")
      set(cost 12)  # 7 to 17 s in one build or another, left to the end they ran alone
    elseif(base MATCHES "sim")
      set(cost 8)
    endif()
    if(test MATCHES "^OverloadTest\\.")
      list(APPEND labels cpu)
      set_tests_properties("${test}" PROPERTIES PROCESSORS 4)
      set(cost 30)
    endif()
    # Renewing 100,000 leases every second must keep up: a claim about time, which ctest's
    # other jobs on 2 cores starved (86 s instead of 20 s; 2% of the leases' validity ended
    # before their renewal went out, and since 7e1f802 such a renewal is not sent). Alone, it
    # measures the watchdog, not the neighbours.
    if(test STREQUAL "OverloadTest.ManyLocksHeldUnderRenewalThenNothingLeft")
      set_tests_properties("${test}" PROPERTIES RUN_SERIAL TRUE)
    endif()
    set_tests_properties("${test}" PROPERTIES LABELS "${labels}" COST ${cost})
  endforeach()
endfunction()

dlock_label(unit ${unit_tests_TESTS})
dlock_label("unit;sim" ${sim_test_TESTS})
foreach(target integration_tests cluster_test sentinel_test node_set_test group_commit_test
               overload_test examples_test tcp_proxy_test)
  dlock_label(integration ${${target}_TESTS})
endforeach()
dlock_label("integration;regression" ${regression_tests_TESTS})
