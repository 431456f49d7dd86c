// A count of this process's C++ heap allocations, for tests that an op's host path allocates
// nothing: a decode loop calls an op thousands of times a second, and every allocation there is
// host time a call (and a lock in the allocator). The global operator new and delete are replaced
// in counting_new.cpp, which every test binary links once (tests/CMakeLists.txt); the replacement
// forwards to malloc and free.
#pragma once

#include <cstdint>

namespace softk_test {

/// Calls of any global operator new so far, on any thread.
int64_t heap_allocations();

/// Runs f() and returns how many heap allocations it made.
template <typename F>
int64_t heap_allocations_during(F&& f) {
  const int64_t before = heap_allocations();
  f();
  return heap_allocations() - before;
}

}  // namespace softk_test
