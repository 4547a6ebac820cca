#include "dtsim/profiler/host_info.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace dtsim::profiler {
namespace {

// "key : value" from a /proc file, or "".
std::string proc_field(const char* file, const std::string& key) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key, 0) == 0) {
            const auto colon = line.find(':');
            if (colon == std::string::npos) return "";
            const auto start = line.find_first_not_of(" \t", colon + 1);
            return start == std::string::npos ? "" : line.substr(start);
        }
    return "";
}

}  // namespace

HostInfo host_info() {
    HostInfo h;
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) h.hostname = name;
    h.cpu_model = proc_field("/proc/cpuinfo", "model name");
    const std::string mem = proc_field("/proc/meminfo", "MemTotal");  // "24571208 kB"
    if (!mem.empty()) h.memory_bytes = std::atoll(mem.c_str()) * 1024;
    h.blas = openblas_get_config();
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
        int length = 0;
        MPI_Get_library_version(version, &length);
        h.mpi = std::string(version, static_cast<std::size_t>(length));
        while (!h.mpi.empty() && (h.mpi.back() == '\n' || h.mpi.back() == '\0')) h.mpi.pop_back();
    }
    if (const char* core = std::getenv("OPENBLAS_CORETYPE")) h.openblas_coretype = core;
    h.blas_core = openblas_get_corename();
    __builtin_cpu_init();
    h.cpu_avx2 = __builtin_cpu_supports("avx2");
    h.cpu_avx512 = __builtin_cpu_supports("avx512f");
    return h;
}

std::string blas_kernel_warning(const HostInfo& h) {
    // OpenBLAS's x86-64 cores without AVX2 kernels (its driver/others/dynamic.c names).
    static constexpr std::string_view generic[] = {"Prescott", "Core2",     "Penryn", "Dunnington",  "Nehalem",  "Atom",
                                                   "Opteron",  "Barcelona", "Bobcat", "Sandybridge", "Bulldozer"};
    if (!h.cpu_avx2 || std::find(std::begin(generic), std::end(generic), h.blas_core) == std::end(generic)) return "";
    return fmt::format(
        "OpenBLAS runs its {} kernels on this {}, which has AVX2{}: OpenBLAS does not recognise the processor, "
        "so GEMMs run 2-3 times slower than they could. OPENBLAS_CORETYPE=Haswell (AVX2){} selects faster "
        "kernels; calibrate and execute under the same setting, and as the torch you predict runs.",
        h.blas_core, h.cpu_model.empty() ? "CPU" : h.cpu_model, h.cpu_avx512 ? " and AVX-512" : "",
        h.cpu_avx512 ? " or SkylakeX (AVX-512)" : "");
}

std::string machine_name(const HostInfo& h) {
    return h.hostname + " (" + h.cpu_model + ")";
}

std::string utc_timestamp() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace dtsim::profiler
