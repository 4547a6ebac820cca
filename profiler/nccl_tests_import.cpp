// Placeholder (issue 4).
#include "dtsim/profiler/nccl_tests_import.hpp"
