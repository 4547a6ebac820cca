// Placeholder (issue 4).
#include "dtsim/profiler/fit.hpp"
