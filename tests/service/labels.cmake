# Labels of the discovered service_operations_test cases (tests/labels.cmake says why here):
# pure logic, but ServiceUndeliveredTest runs on a real redis-server.
foreach(test IN LISTS service_operations_test_TESTS)
  if(test MATCHES "^ServiceUndeliveredTest\\.")
    set_tests_properties("${test}" PROPERTIES LABELS "integration;service")
  else()
    set_tests_properties("${test}" PROPERTIES LABELS "unit;service")
  endif()
endforeach()
