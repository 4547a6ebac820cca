#include "dtsim/sim/report.hpp"

#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/nccl_model.hpp"
#include "dtsim/sim/strategy.hpp"

#include "dtsim/common/format_bytes.hpp"
#include "dtsim/profiler/presets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace dtsim::sim {

std::vector<std::string> nccl_choices(const SimResult& r, const Config& config, const calib::Calibration& calibration) {
    std::vector<std::string> out;
    if (!calibration.nccl.present()) return std::vector<std::string>(r.metrics.collectives.size());
    const CostModel cost(calibration, parse_nccl_env(config.env));
    for (const CollectiveSummary& c : r.metrics.collectives) {
        std::string label;
        // The summary's entry stands for calls alike in kind, bytes and group size: its first task says the rest.
        for (const Task& t : r.plan.tasks) {
            if (t.kind != TaskKind::collective || t.collective != c.kind || t.bytes != c.bytes) continue;
            const CommGroup& g = r.plan.groups[static_cast<std::size_t>(t.group)];
            if (g.size != c.group_size) continue;
            if (const auto choice = cost.nccl_choice(t.collective, t.bytes, g, t.dtype))
                label = fmt::format("{}/{}", to_string(choice->algo), to_string(choice->proto));
            break;
        }
        out.push_back(std::move(label));
    }
    return out;
}

namespace {

// The run's sockets where a socket network carries it across nodes.
std::optional<NcclSockets> run_sockets(const Config& config, const calib::Calibration& calibration) {
    const calib::NcclSocketNet& net = calibration.nccl.socket;
    if (!calibration.nccl.present() || !net.present() || config.topology.nodes < 2) return std::nullopt;
    return nccl_sockets(net, parse_nccl_env(config.env));
}

std::string socket_text(const NcclSockets& s, const calib::NcclSocketNet& net) {
    const double nic_share = net.channel_gbps();
    const auto origin = [](bool from_nic) { return from_nic ? " (the NIC's default)" : ""; };
    std::string out = fmt::format(
        "NCCL_SOCKET_NTHREADS={}{}, NCCL_NSOCKS_PERTHREAD={}{}: {} TCP flow{} per channel carr{} {:.3g} of the "
        "{:.3g} GB/s its NIC share allows",
        s.threads, origin(s.threads_default), s.socks_per_thread, origin(s.socks_default), s.flows,
        s.flows > 1 ? "s" : "", s.flows > 1 ? "y" : "ies", std::min(s.channel_gbps, nic_share), nic_share);
    if (s.channel_gbps < nic_share) {
        const auto [threads, socks] = nccl_socket_suggestion(net);
        if (threads * socks > s.threads * s.socks_per_thread)
            out +=
                fmt::format("; --env NCCL_SOCKET_NTHREADS={} --env NCCL_NSOCKS_PERTHREAD={} fills it", threads, socks);
    }
    return out;
}

}  // namespace

std::string socket_summary(const Config& config, const calib::Calibration& calibration) {
    const auto s = run_sockets(config, calibration);
    return s ? socket_text(*s, calibration.nccl.socket) : std::string();
}

Json report_json(const SimResult& r, const Config& config, const calib::Calibration& calibration,
                 const ReportExtras& extras) {
    const Metrics& m = r.metrics;
    Json j;
    j["model"] = config.model;
    j["parameters"] = r.workload->param_count();
    j["strategy"] = config.strategy;
    j["hardware"] = calibration.name;
    j["hardware_source"] = calibration.provenance.source;
    j["nodes"] = config.topology.nodes;
    j["gpus_per_node"] = config.topology.gpus_per_node;
    j["world_size"] = config.topology.world_size();
    j["micro_batch"] = config.micro_batch;
    j["seq_len"] = r.workload->seq_len;
    j["grad_accum"] = config.grad_accum;
    j["global_batch"] = m.global_batch;
    j["precision"] = to_string(config.precision);
    j["optimizer"] = optimizer_name(config);
    j["activation_checkpointing"] = config.activation_checkpointing;
    if (config.ac_freq > 1) j["ac_freq"] = config.ac_freq;
    if (config.ac_op) j["ac_op"] = true;
    j["sync_batchnorm"] = config.sync_batchnorm;
    const auto& strategy = strategies().find(config.strategy);
    Knobs knobs(strategy.name, strategy.value.knobs, config.knobs);
    j["knobs"] = Json::object();
    for (const auto& [k, v] : knobs.values())
        if (knobs.applies(k)) j["knobs"][k] = v;

    j["step_time_s"] = m.step_time_s;
    if (extras.phases.size() > 1) {
        j["step_time_avg_s"] = extras.average_step_time_s;
        j["phases"] = Json::array();
        for (const auto& p : extras.phases)
            j["phases"].push_back({{"label", p.label},
                                   {"iteration", p.iteration},
                                   {"weight", p.weight},
                                   {"step_time_s", p.step_time_s},
                                   {"exposed_comm_s", p.exposed_comm_s}});
    }
    j["samples_per_s"] = m.samples_per_s;
    j["tokens_per_s"] = m.tokens_per_s;
    j["mfu"] = m.mfu;
    j["mfu_peak_tflops"] = m.mfu_peak_tflops;
    j["compute_s"] = m.compute_s;
    j["comm_s"] = m.comm_s;
    j["exposed_comm_s"] = m.exposed_comm_s;
    j["straggler_wait_s"] = m.straggler_wait_s;
    j["overlap_fraction"] = m.overlap_fraction;
    j["peak_memory_bytes"] = m.peak_memory_bytes;
    j["device_memory_bytes"] = m.device_memory_bytes;
    j["usable_memory_bytes"] = m.usable_memory_bytes;
    j["fits"] = m.fits;
    j["memory"] = Json::object();
    for (int c = 0; c < kMemCategories; ++c)
        if (!is_host(static_cast<MemCategory>(c)))
            j["memory"][std::string(to_string(static_cast<MemCategory>(c)))] =
                m.peak_breakdown[static_cast<std::size_t>(c)];
    j["host_memory_bytes"] = m.host_memory_bytes;
    j["copy_s"] = m.copy_s;
    j["host_compute_s"] = m.host_compute_s;
    j["io_s"] = m.io_s;
    j["transfers"] = {{"h2d_bytes", m.h2d_bytes},
                      {"d2h_bytes", m.d2h_bytes},
                      {"nvme_read_bytes", m.nvme_read_bytes},
                      {"nvme_write_bytes", m.nvme_write_bytes}};
    j["comm_bytes_per_step"] = m.comm_bytes_per_step;
    if (!config.env.empty()) {
        j["env"] = Json::object();
        for (const auto& [name, value] : config.env) j["env"][name] = value;
    }
    if (const auto s = run_sockets(config, calibration)) {
        const calib::NcclSocketNet& net = calibration.nccl.socket;
        j["sockets"] = {{"network", calib::describe(net)},
                        {"threads", s->threads},
                        {"socks_per_thread", s->socks_per_thread},
                        {"flows_per_channel", s->flows},
                        {"channel_gbps", std::min(s->channel_gbps, net.channel_gbps())},
                        {"nic_channel_gbps", net.channel_gbps()},
                        {"summary", socket_text(*s, net)}};
    }
    j["collectives"] = Json::array();
    const std::vector<std::string> nccl = nccl_choices(r, config, calibration);
    for (std::size_t i = 0; i < m.collectives.size(); ++i) {
        const auto& c = m.collectives[i];
        Json x = {{"kind", to_string(c.kind)}, {"bytes", c.bytes}, {"group_size", c.group_size}, {"count", c.count}};
        if (!nccl[i].empty()) x["nccl"] = nccl[i];  // NCCL's algorithm/protocol, from its cost model
        j["collectives"].push_back(std::move(x));
    }
    if (!r.plan.buckets.empty()) {
        // Parameter names by index, for the bucket listing.
        std::vector<const std::string*> names;
        for (const auto& layer : r.workload->layers)
            for (const auto& p : layer.params) {
                if (p.index >= static_cast<int>(names.size())) names.resize(static_cast<std::size_t>(p.index) + 1);
                names[static_cast<std::size_t>(p.index)] = &p.name;
            }
        j["buckets"] = Json::array();
        for (const auto& b : r.plan.buckets) {
            Json params = Json::array();
            for (int p : b.params) params.push_back(*names[static_cast<std::size_t>(p)]);
            j["buckets"].push_back({{"index", b.index}, {"bytes", b.bytes}, {"params", params}});
        }
    }
    j["notes"] = r.plan.notes;
    if (!extras.launch.empty()) j["launch"] = extras.launch;
    return j;
}

std::vector<std::string> memory_levers(const SimResult& result, const Config& config) {
    const Metrics& m = result.metrics;
    const auto at_peak = [&](MemCategory c) { return m.peak_breakdown[static_cast<std::size_t>(c)]; };
    std::vector<std::string> tries;
    if (config.micro_batch > 1 && at_peak(MemCategory::activations) > 0)
        tries.push_back("a smaller --micro-batch (with --grad-accum to keep the global batch)");
    if (config.precision == Precision::fp32 && at_peak(MemCategory::activations) > 0)
        tries.push_back("--precision bf16-mixed (halves activations)");
    if (result.workload->attention == models::AttentionImpl::eager && result.workload->seq_len > 1)
        tries.push_back("--attention flash (no s x s attention matrices)");
    if (at_peak(MemCategory::buckets) > 0)
        tries.push_back(fmt::format("--set gradient_as_bucket_view=true (up to {} less)",
                                    dtsim::format_bytes(at_peak(MemCategory::buckets))));
    if (!config.activation_checkpointing && at_peak(MemCategory::activations) > 0)
        tries.push_back("--activation-checkpointing");
    // The next lever for model states: shard them, or shard over more GPUs, or offload.
    const auto knob = [&](const std::string& key) {
        for (const auto& [k, v] : config.knobs)
            if (k == key) return v;
        return std::string();
    };
    if (config.strategy == "ddp")
        tries.push_back("a strategy that shards model states (FSDP, ZeRO)");
    else if (config.strategy == "deepspeed" && knob("stage") != "3")
        tries.push_back("--set stage=3 (ZeRO-3 shards the parameters too)");
    else if (config.strategy == "fsdp2")
        tries.push_back(knob("reshard_after_forward") == "false"
                            ? "more GPUs to shard over (--nodes), or --set reshard_after_forward=auto"
                            : "more GPUs to shard over (--nodes)");
    else
        tries.push_back(fmt::format("more GPUs to shard over (--nodes), or {}", config.strategy == "fsdp"
                                                                                    ? "--set cpu_offload=true"
                                                                                    : "--set offload_optimizer=cpu"));
    return tries;
}

}  // namespace dtsim::sim
