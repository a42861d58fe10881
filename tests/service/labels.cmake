# Labels of the discovered service_operations_test cases (tests/labels.cmake says why here).
foreach(test IN LISTS service_operations_test_TESTS)
  set_tests_properties("${test}" PROPERTIES LABELS "unit;service")
endforeach()
