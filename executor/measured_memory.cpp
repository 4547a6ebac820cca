#include "dtsim/executor/measured_memory.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace dtsim::executor {

std::int64_t peak_memory_in_measured_order(const sim::Plan& plan, const std::vector<TaskTiming>& row) {
    struct Change {
        std::int64_t time_ns;
        std::int64_t bytes;
    };
    std::vector<Change> changes;
    for (std::size_t i = 0; i < plan.tasks.size() && i < row.size(); ++i)
        for (const auto& m : plan.memory_of(plan.tasks[i])) {
            if (m.bytes == 0 || sim::is_host(m.category)) continue;
            changes.push_back({m.bytes > 0 ? row[i].start_ns : row[i].end_ns, m.bytes});
        }
    // By time; at one instant the frees (negative) before the allocations.
    std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
        return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.bytes < b.bytes;
    });
    std::int64_t live = 0;
    for (int c = 0; c < sim::kMemCategories; ++c)
        if (!sim::is_host(static_cast<sim::MemCategory>(c))) live += plan.resident[static_cast<std::size_t>(c)];
    std::int64_t peak = live;
    for (const auto& c : changes) {
        live += c.bytes;
        peak = std::max(peak, live);
    }
    return peak;
}

std::int64_t process_peak_rss_bytes() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmHWM:", 0) == 0) {
            std::istringstream in(line.substr(6));
            std::int64_t kib = 0;
            in >> kib;
            return kib * 1024;
        }
    return 0;
}

}  // namespace dtsim::executor
