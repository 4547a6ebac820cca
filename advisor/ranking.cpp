#include "dtsim/advisor/ranking.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace dtsim::advisor {

Objective objective_from_string(std::string_view s) {
    if (s == "throughput") return Objective::throughput;
    if (s == "memory") return Objective::memory;
    throw ConfigError(fmt::format("--objective {}: expected throughput or memory", s));
}

double parse_headroom(std::string_view s) {
    std::string_view num = s;
    const bool percent = !num.empty() && num.back() == '%';
    if (percent) num.remove_suffix(1);
    double x = 0;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), x);
    if (ec != std::errc{} || ptr != num.data() + num.size() || num.empty())
        throw ConfigError(fmt::format("--memory-headroom {}: expected a fraction (0.1) or a percentage (10%)", s));
    if (percent) x /= 100.0;
    if (!(x >= 0 && x < 1))
        throw ConfigError(fmt::format("--memory-headroom {}: must be at least 0 and below 100%", s));
    return x;
}

bool eligible(const SweepResult& r, double memory_headroom) {
    return r.simulated && r.fits &&
           static_cast<double>(r.peak_memory_bytes) <=
               (1.0 - memory_headroom) * static_cast<double>(r.usable_memory_bytes);
}

Ranking rank(const std::vector<SweepResult>& results, const RankOptions& options) {
    Ranking out;
    for (std::size_t i = 0; i < results.size(); ++i)
        if (eligible(results[i], options.memory_headroom)) out.order.push_back(i);
    auto faster = [&](std::size_t a, std::size_t b) { return results[a].samples_per_s > results[b].samples_per_s; };
    if (options.objective == Objective::throughput) {
        std::stable_sort(out.order.begin(), out.order.end(), faster);
    } else {
        std::stable_sort(out.order.begin(), out.order.end(), [&](std::size_t a, std::size_t b) {
            if (results[a].peak_memory_bytes != results[b].peak_memory_bytes)
                return results[a].peak_memory_bytes < results[b].peak_memory_bytes;
            return faster(a, b);
        });
    }
    for (std::size_t i : out.order) {
        const auto& p = results[i];
        const bool dominated = std::any_of(out.order.begin(), out.order.end(), [&](std::size_t j) {
            const auto& q = results[j];
            return q.samples_per_s >= p.samples_per_s && q.peak_memory_bytes <= p.peak_memory_bytes &&
                   (q.samples_per_s > p.samples_per_s || q.peak_memory_bytes < p.peak_memory_bytes);
        });
        if (!dominated) out.pareto.push_back(i);
    }
    std::stable_sort(out.pareto.begin(), out.pareto.end(), faster);
    return out;
}

std::string explain(const SweepResult& best, const SweepResult& alt) {
    std::string out = alt.candidate.label();
    if (best.samples_per_s > 0) {
        const double pct = (1.0 - alt.samples_per_s / best.samples_per_s) * 100.0;
        if (std::abs(pct) < 0.5) {
            out += " is as fast (within 0.5 %)";
        } else {
            out += fmt::format(" is {:.0f} % {}", std::abs(pct), pct > 0 ? "slower" : "faster");
            const double d_comm = alt.exposed_comm_s - best.exposed_comm_s;
            const double d_compute = alt.compute_s - best.compute_s;
            if (std::abs(d_comm) >= std::abs(d_compute))
                out += fmt::format(": {:.3g} s of exposed communication vs {:.3g} s", alt.exposed_comm_s,
                                   best.exposed_comm_s);
            else
                out += fmt::format(": {:.3g} s of compute vs {:.3g} s", alt.compute_s, best.compute_s);
            out += fmt::format(" per step of {} samples", alt.candidate.config.micro_batch *
                                                              alt.candidate.config.grad_accum *
                                                              alt.candidate.config.topology.world_size());
        }
    }
    const std::int64_t dm = alt.peak_memory_bytes - best.peak_memory_bytes;
    if (std::abs(static_cast<double>(dm)) < static_cast<double>(1 << 20) * 16)
        out += "; same memory";
    else
        out += fmt::format("; uses {} {} memory ({} vs {})", gib(dm < 0 ? -dm : dm), dm > 0 ? "more" : "less",
                           gib(alt.peak_memory_bytes), gib(best.peak_memory_bytes));
    return out;
}

}  // namespace dtsim::advisor
