#include "dtsim/sim/report.hpp"

#include <fmt/format.h>

namespace dtsim::sim {

std::string task_name(const Plan& plan, const models::Workload& workload, const Task& task) {
    switch (task.kind) {
        case TaskKind::compute:
            if (task.layer >= 0)
                return fmt::format("{} {}", to_string(task.phase),
                                   workload.layers[static_cast<std::size_t>(task.layer)].name);
            if (task.phase == Phase::optimizer) return "optimizer step";
            if (task.phase == Phase::gradient_copy) return "copy buckets to .grad";
            if (task.phase == Phase::parameter_copy) return "copy out all-gathered parameters";
            return std::string(to_string(task.phase));
        case TaskKind::collective:
            if (task.bucket >= 0) return fmt::format("{} bucket {}", to_string(task.collective), task.bucket);
            return fmt::format("{} {} B", to_string(task.collective), task.bytes);
        default: break;
    }
    (void)plan;
    return std::string(to_string(task.kind));
}

}  // namespace dtsim::sim
