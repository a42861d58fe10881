# Labels for the discovered GoogleTest cases, by test name, read by ctest after the discovered
# tests are added (TEST_INCLUDE_FILES keeps their order). gtest_discover_tests (CMake 3.25)
# flattens a list-valued property, so PROPERTIES LABELS "unit;sim" would set "unit" alone:
# every case's full list is set here. scripts/test.sh picks tests per preset by these labels:
#   unit, sim          pure logic (every preset)
#   integration        real redis-server processes; regression: one file per issue
#   cluster, sentinel  a Redis Cluster or a Sentinel set per test (seconds to start)
#   failover           long failover suites: run once, in the dev build (timing and safety)
#   slow               overload (100,000 locks) and the examples (a process per example)
#   serial             needs a quiet CPU: RUN_SERIAL, never next to another test
function(dlock_label base)
  foreach(test IN LISTS ARGN)
    set(labels ${base})
    if(test MATCHES "^Cluster")
      list(APPEND labels cluster)
    endif()
    if(test MATCHES "^Sentinel")
      list(APPEND labels sentinel)
    endif()
    if(test MATCHES "^(ClusterFailoverTest\\.|SentinelNodeTest\\.(TheHolderKeeps|ALockTheReplicaLost|AGracefulFailover|AWaiterFollows))")
      list(APPEND labels failover)
    endif()
    if(test MATCHES "^(OverloadTest\\.|Examples/)")
      list(APPEND labels slow)
    endif()
    set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
    if(test MATCHES "^OverloadTest\\.")
      set_tests_properties("${test}" PROPERTIES LABELS "${labels};serial" RUN_SERIAL TRUE)
    endif()
  endforeach()
endfunction()

dlock_label(unit ${unit_tests_TESTS})
dlock_label("unit;sim" ${sim_test_TESTS})
foreach(target lock_test redlock_test tls_auth_test cli_test watchdog_test fencing_test
               restart_test reentrancy_test waiting_test fair_test lockable_test
               fenced_store_test ops_test fake_server_test async_test observer_test
               shared_lock_test semaphore_test cluster_test sentinel_test node_set_test
               overload_test examples_test tcp_proxy_test)
  dlock_label(integration ${${target}_TESTS})
endforeach()
foreach(target issue_12_test issue_12_review_test)
  dlock_label("integration;regression" ${${target}_TESTS})
endforeach()
