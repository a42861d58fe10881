# Gives every discovered sim_test case both of its labels. gtest_discover_tests (CMake 3.25)
# flattens a list-valued property, so PROPERTIES LABELS "unit;sim" would set "unit" alone;
# this runs after the discovered tests are added (TEST_INCLUDE_FILES keeps their order).
foreach(test IN LISTS sim_test_TESTS)
  set_tests_properties("${test}" PROPERTIES LABELS "unit;sim")
endforeach()
