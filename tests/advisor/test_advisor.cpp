// dtsim sweep / advise: search-space enumeration, the sweep, ranking and explanations.
#include "dtsim/advisor/ranking.hpp"
#include "dtsim/advisor/search_space.hpp"
#include "dtsim/advisor/sweep.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::advisor;

namespace {

sim::Config base_config(const std::string& model, int nodes, int gpus) {
    sim::Config c;
    c.model = model;
    c.topology = {nodes, gpus};
    c.precision = sim::Precision::bf16_mixed;
    c.seq_len = 256;
    return c;
}

std::vector<std::string> labels(const std::vector<Candidate>& cs) {
    std::vector<std::string> out;
    for (const auto& c : cs) out.push_back(c.label());
    return out;
}

const calib::Calibration& h100() {
    static const calib::Calibration cal = calib::load_hardware("h100-sxm");
    return cal;
}

bool has_axis(const SearchSpace& space, const std::string& name) {
    return std::any_of(space.axes.begin(), space.axes.end(), [&](const Axis& a) { return a.name == name; });
}

}  // namespace

TEST_CASE("enumeration is the cartesian product, strategy slowest and the last axis fastest") {
    const auto space = parse_axes({"strategy=ddp,fsdp", "micro_batch=1,2", "precision=fp32,bf16-mixed"});
    const auto cs = enumerate(space, base_config("gpt2", 1, 2));
    REQUIRE(cs.size() == 8);
    CHECK(labels(cs) ==
          std::vector<std::string>{"ddp micro_batch=1 precision=fp32", "ddp micro_batch=1 precision=bf16-mixed",
                                   "ddp micro_batch=2 precision=fp32", "ddp micro_batch=2 precision=bf16-mixed",
                                   "fsdp micro_batch=1 precision=fp32", "fsdp micro_batch=1 precision=bf16-mixed",
                                   "fsdp micro_batch=2 precision=fp32", "fsdp micro_batch=2 precision=bf16-mixed"});
    for (std::size_t i = 0; i < cs.size(); ++i) CHECK(cs[i].index == i);
    CHECK(cs[3].config.micro_batch == 2);
    CHECK(cs[3].config.precision == sim::Precision::bf16_mixed);
    CHECK(cs[5].config.strategy == "fsdp");
}

TEST_CASE("knob axes apply only to the strategies that declare them") {
    const auto space = parse_axes({"strategy=ddp,fsdp,deepspeed", "bucket_cap_mb=10,25,50", "stage=1,3"});
    const auto cs = enumerate(space, base_config("gpt2", 1, 2));
    // ddp x 3 bucket caps, fsdp once, deepspeed x 2 stages.
    REQUIRE(cs.size() == 6);
    CHECK(cs[0].label() == "ddp bucket_cap_mb=10");
    CHECK(cs[2].config.knobs == std::vector<std::pair<std::string, std::string>>{{"bucket_cap_mb", "50"}});
    CHECK(cs[3].label() == "fsdp");
    CHECK(cs[3].config.knobs.empty());
    CHECK(cs[5].label() == "deepspeed stage=3");
    // A knob no strategy of the space declares is a mistake, named.
    try {
        enumerate(parse_axes({"strategy=fsdp", "bucket_cap_mb=10"}), base_config("gpt2", 1, 2));
        FAIL("expected a ConfigError");
    } catch (const ConfigError& e) {
        CHECK_THAT(e.what(), Catch::Contains("axis 'bucket_cap_mb'"));
    }
}

TEST_CASE("a Lightning name in the strategy axis keeps its knobs") {
    const auto cs = enumerate(parse_axes({"strategy=deepspeed_stage_2,ddp"}), base_config("gpt2", 1, 2));
    REQUIRE(cs.size() == 2);
    CHECK(cs[0].config.strategy == "deepspeed");
    CHECK(cs[0].label() == "deepspeed_stage_2");
}

TEST_CASE("a global batch derives grad_accum and skips non-divisible micro-batches with a reason") {
    auto space = parse_axes({"micro_batch=1,2,3,4"});
    space.global_batch = 32;
    const auto cs = enumerate(space, base_config("gpt2", 1, 4));
    REQUIRE(cs.size() == 4);
    CHECK(cs[0].config.grad_accum == 8);
    CHECK(cs[1].config.grad_accum == 4);
    CHECK_THAT(cs[2].skip_reason, Catch::Contains("not a multiple of micro_batch 3 x 4 GPUs"));
    CHECK(cs[3].config.grad_accum == 2);
    CHECK(cs[3].label() == "ddp micro_batch=4 grad_accum=2");
    const auto results = run_sweep(cs, h100());
    CHECK_FALSE(results[2].simulated);
    CHECK_FALSE(results[2].fits);
    CHECK(results[2].why == cs[2].skip_reason);
    // Same global batch: the same samples per step everywhere.
    CHECK(results[0].samples_per_s * results[0].step_time_s == Approx(32).epsilon(1e-6));
    CHECK(results[3].samples_per_s * results[3].step_time_s == Approx(32).epsilon(1e-6));
}

TEST_CASE("an empty space or contradictory axes are ConfigErrors naming the axis") {
    CHECK_THROWS_WITH(enumerate(SearchSpace{}, base_config("gpt2", 1, 2)), Catch::Contains("empty"));
    CHECK_THROWS_WITH(parse_axis("micro_batch="), Catch::Contains("axis 'micro_batch' has no values"));
    CHECK_THROWS_WITH(parse_axes({"micro_batch=1", "micro_batch=2"}),
                      Catch::Contains("axis 'micro_batch' is given twice"));
    CHECK_THROWS_WITH(parse_axes({"stage=1,1"}), Catch::Contains("axis 'stage' lists '1' twice"));
    auto space = parse_axes({"grad_accum=1,2"});
    space.global_batch = 16;
    CHECK_THROWS_WITH(enumerate(space, base_config("gpt2", 1, 2)), Catch::Contains("axis 'grad_accum'"));
    CHECK_THROWS_WITH(enumerate(parse_axes({"micro_batch=0"}), base_config("gpt2", 1, 2)),
                      Catch::Contains("axis 'micro_batch'"));
    // A class-name knob's value has the form sim::Knobs takes, checked here to name its axis.
    CHECK_THROWS_WITH(enumerate(parse_axes({"strategy=fsdp", "activation_checkpointing_policy=GPT2Block;x"}),
                                base_config("gpt2", 1, 2)),
                      Catch::Contains("axis 'activation_checkpointing_policy'") && Catch::Contains("class name"));
    // A policy naming the block turns checkpointing on; a candidate is skipped only where an
    // activation_checkpointing axis asks for it off.
    const auto policy = enumerate(parse_axes({"strategy=fsdp", "activation_checkpointing_policy=none,GPT2Block"}),
                                  base_config("gpt2", 1, 2));
    REQUIRE(policy.size() == 2);
    CHECK_FALSE(policy[0].config.activation_checkpointing);
    CHECK(policy[1].config.activation_checkpointing);
    CHECK(policy[1].skip_reason.empty());
    const auto off = enumerate(parse_axes({"strategy=fsdp", "activation_checkpointing_policy=GPT2Block",
                                           "activation_checkpointing=false,true"}),
                               base_config("gpt2", 1, 2));
    REQUIRE(off.size() == 2);
    CHECK_THAT(off[0].skip_reason, Catch::Contains("not activation_checkpointing=false"));
    CHECK(off[1].skip_reason.empty());
    CHECK_THROWS_WITH(enumerate(parse_axes({"strategy=dpp"}), base_config("gpt2", 1, 2)),
                      Catch::Contains("axis 'strategy'"));
}

TEST_CASE("JSON search spaces parse, and their errors name the file and the field") {
    const auto space = parse_space_json(
        R"({"strategy": ["ddp", "fsdp"], "micro_batch": [1, 2], "activation_checkpointing": [false, true],
            "knobs": {"bucket_cap_mb": [25, 100]}, "global_batch": 64})",
        "space.json");
    REQUIRE(space.axes.size() == 4);
    CHECK(space.axes[2].values == std::vector<std::string>{"false", "true"});
    CHECK(space.axes[3].name == "bucket_cap_mb");
    CHECK(space.global_batch == 64);
    CHECK(enumerate(space, base_config("gpt2", 1, 2)).size() == 8 + 4);

    auto error_of = [](const std::string& text) -> std::string {
        try {
            parse_space_json(text, "space.json");
        } catch (const ParseError& e) {
            return e.field() + " | " + e.what();
        }
        return "no error";
    };
    CHECK_THAT(error_of(R"({"micro_batch": 4})"), Catch::StartsWith("/micro_batch | space.json"));
    CHECK_THAT(error_of(R"({"knobs": {"stage": [1, null]}})"), Catch::StartsWith("/knobs/stage/1 |"));
    CHECK_THAT(error_of(R"({"micro_bach": [1]})"),
               Catch::StartsWith("/micro_bach |") && Catch::Contains("unknown axis"));
    CHECK_THAT(error_of(R"({"strategy": []})"), Catch::StartsWith("/strategy |"));
    CHECK_THAT(error_of(R"({"strategy": ["ddp",)"), Catch::Contains("not valid JSON"));
}

TEST_CASE("the recommendation always fits, even where the fastest configuration does not") {
    // llama2-7b on 8 H100: DDP and large micro-batches run out of memory.
    sim::Config base = base_config("llama2-7b", 1, 8);
    base.seq_len = 0;
    const auto cs = enumerate(parse_axes({"strategy=ddp,fsdp", "micro_batch=1,64"}), base);
    const auto results = run_sweep(cs, h100());
    REQUIRE(results.size() == 4);
    const auto fastest = std::max_element(
        results.begin(), results.end(), [](const auto& a, const auto& b) { return a.samples_per_s < b.samples_per_s; });
    CHECK_FALSE(fastest->fits);
    CHECK_THAT(fastest->why, Catch::Contains("does not fit"));
    const Ranking ranking = rank(results, {Objective::throughput, 0.1});
    REQUIRE_FALSE(ranking.order.empty());
    for (std::size_t i : ranking.order) {
        CHECK(results[i].fits);
        CHECK(static_cast<double>(results[i].peak_memory_bytes) <=
              0.9 * static_cast<double>(results[i].usable_memory_bytes));
    }
    for (std::size_t i : ranking.pareto) CHECK(eligible(results[i], 0.1));
    CHECK(results[ranking.order.front()].candidate.label() == "fsdp micro_batch=1");
}

TEST_CASE("ranking is stable, deterministic and ordered by the objective") {
    const auto cs = enumerate(parse_axes({"strategy=ddp,fsdp,deepspeed", "micro_batch=1,2,4", "stage=1,2,3"}),
                              base_config("gpt2", 1, 4));
    const auto a = run_sweep(cs, h100());
    const auto b = run_sweep(cs, h100());
    CHECK(sweep_csv(a) == sweep_csv(b));
    const Ranking ra = rank(a, {Objective::throughput, 0});
    const Ranking rb = rank(b, {Objective::throughput, 0});
    CHECK(ra.order == rb.order);
    CHECK(ra.pareto == rb.pareto);
    REQUIRE(ra.order.size() == cs.size());
    for (std::size_t i = 1; i < ra.order.size(); ++i) {
        const auto& p = a[ra.order[i - 1]];
        const auto& q = a[ra.order[i]];
        CHECK(p.samples_per_s >= q.samples_per_s);
        if (p.samples_per_s == q.samples_per_s) CHECK(ra.order[i - 1] < ra.order[i]);  // ties by enumeration
    }
    const Ranking rm = rank(a, {Objective::memory, 0});
    for (std::size_t i = 1; i < rm.order.size(); ++i)
        CHECK(a[rm.order[i - 1]].peak_memory_bytes <= a[rm.order[i]].peak_memory_bytes);
    // The Pareto front: nothing on it is dominated, and the fastest and the smallest are on it.
    CHECK(std::find(ra.pareto.begin(), ra.pareto.end(), ra.order.front()) != ra.pareto.end());
    for (std::size_t i = 1; i < ra.pareto.size(); ++i)
        CHECK(a[ra.pareto[i - 1]].peak_memory_bytes > a[ra.pareto[i]].peak_memory_bytes);
}

TEST_CASE("explanations give the difference in numbers") {
    SweepResult best, alt;
    best.candidate.strategy = "fsdp";
    alt.candidate.strategy = "ddp";
    alt.candidate.config.topology = {1, 8};
    best.samples_per_s = 100;
    alt.samples_per_s = 82;
    best.exposed_comm_s = 0.3;
    alt.exposed_comm_s = 2.1;
    best.compute_s = alt.compute_s = 5;
    best.peak_memory_bytes = 10LL << 30;
    alt.peak_memory_bytes = 22LL << 30;
    const std::string text = explain(best, alt);
    CHECK_THAT(text, Catch::StartsWith("ddp is 18 % slower: 2.1 s of exposed communication vs 0.3 s"));
    CHECK_THAT(text, Catch::Contains("uses 12.00 GiB more memory"));
    CHECK(parse_headroom("10%") == Approx(0.1));
    CHECK(parse_headroom("0.25") == Approx(0.25));
    CHECK_THROWS_AS(parse_headroom("150%"), ConfigError);
}

TEST_CASE("the CSV has a header and one row per configuration") {
    auto space = parse_axes({"strategy=ddp,fsdp", "micro_batch=1,2,3", "bucket_cap_mb=25,100"});
    space.global_batch = 8;
    const auto cs = enumerate(space, base_config("gpt2", 1, 2));
    const std::string csv = sweep_csv(run_sweep(cs, h100()));
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start < csv.size()) {
        const auto nl = csv.find('\n', start);
        lines.push_back(csv.substr(start, nl - start));
        start = nl + 1;
    }
    REQUIRE(lines.size() == cs.size() + 1);
    CHECK(lines[0] ==
          "index,strategy,micro_batch,bucket_cap_mb,grad_accum,step_time_s,samples_per_s,tokens_per_s,mfu,"
          "exposed_comm_s,peak_memory_bytes,fits,why");
    const auto columns = std::count(lines[0].begin(), lines[0].end(), ',');
    for (std::size_t i = 1; i < lines.size(); ++i) {
        CHECK_THAT(lines[i], Catch::StartsWith(std::to_string(i - 1) + ","));
        if (lines[i].find('"') == std::string::npos)
            CHECK(std::count(lines[i].begin(), lines[i].end(), ',') == columns);
    }
    CHECK_THAT(lines[5], Catch::Contains(",false,") && Catch::Contains("not a multiple"));  // ddp micro_batch=3
}

TEST_CASE("a sweep's JSON reads back with its figures, and with the base configuration its rows' configurations") {
    auto space = parse_axes({"strategy=ddp,fsdp", "micro_batch=1,2,3", "bucket_cap_mb=25,100"});
    space.global_batch = 8;
    const sim::Config base = base_config("gpt2", 1, 2);
    const auto written = run_sweep(enumerate(space, base), h100());
    const std::string text = sweep_json(written);

    const auto figures_only = parse_sweep_json(text, "sweep.json", nullptr);
    REQUIRE(figures_only.size() == written.size());
    for (std::size_t i = 0; i < written.size(); ++i) {
        INFO(written[i].candidate.label());
        CHECK(figures_only[i].candidate.label() == written[i].candidate.label());
        CHECK(figures_only[i].simulated == written[i].simulated);
        CHECK(figures_only[i].fits == written[i].fits);
        CHECK(figures_only[i].why == written[i].why);
        CHECK(figures_only[i].step_time_s == Approx(written[i].step_time_s).epsilon(1e-12));
        CHECK(figures_only[i].peak_memory_bytes == written[i].peak_memory_bytes);
    }
    // The same text again: a sweep of the rows read back gives the same file.
    CHECK(sweep_json(figures_only) == text);

    const auto rebuilt = parse_sweep_json(text, "sweep.json", &base);
    for (std::size_t i = 0; i < written.size(); ++i) {
        if (!written[i].simulated) continue;
        INFO(written[i].candidate.label());
        const sim::Config& want = written[i].candidate.config;
        const sim::Config& got = rebuilt[i].candidate.config;
        CHECK(got.strategy == want.strategy);
        CHECK(got.micro_batch == want.micro_batch);
        CHECK(got.grad_accum == want.grad_accum);
        // Simulated again, a rebuilt row gives the figures in the file.
        std::shared_ptr<const models::Workload> workload;
        CHECK(simulate_outcome(got, workload, h100()).step_time_s == Approx(written[i].step_time_s).epsilon(1e-12));
    }

    // Another base than the sweep's: named, with the field.
    sim::Config other = base;
    other.micro_batch = 5;
    const auto one_axis = run_sweep(enumerate(parse_axes({"strategy=ddp,fsdp"}), base), h100());
    CHECK_THROWS_WITH(parse_sweep_json(sweep_json(one_axis), "s.json", &other), Catch::Contains("s.json") &&
                                                                                    Catch::Contains("/0/micro_batch") &&
                                                                                    Catch::Contains("--micro-batch"));
    // Not a sweep: the file and what was expected.
    CHECK_THROWS_WITH(parse_sweep_json("{\"traceEvents\": []}", "t.json", nullptr),
                      Catch::Contains("t.json") && Catch::Contains("array of sweep rows"));
    CHECK_THROWS_WITH(parse_sweep_json("[{\"settings\": {}}]", "s.json", nullptr),
                      Catch::Contains("/0/micro_batch") && Catch::Contains("missing"));
}

TEST_CASE("the default advise space covers DDP, FSDP and ZeRO, HYBRID_SHARD only across nodes") {
    const auto one =
        enumerate(default_space(base_config("gpt2", 1, 8), 64, calib::Calibration{}), base_config("gpt2", 1, 8));
    const auto two =
        enumerate(default_space(base_config("gpt2", 2, 8), 64, calib::Calibration{}), base_config("gpt2", 2, 8));
    auto has = [](const std::vector<Candidate>& cs, const std::string& s) {
        return std::any_of(cs.begin(), cs.end(),
                           [&](const Candidate& c) { return c.label().find(s) != std::string::npos; });
    };
    CHECK_FALSE(has(one, "HYBRID_SHARD"));
    CHECK(has(two, "HYBRID_SHARD"));
    CHECK(has(one, "stage=3"));
    CHECK(has(one, "bucket_cap_mb=100"));
    // micro-batch 1..8 keep global batch 64 on 8 GPUs; 16 does not divide it.
    CHECK_FALSE(has(one, "micro_batch=16"));
    CHECK(has(one, "offload_optimizer=cpu"));
    CHECK(has(one, "cpu_offload=true"));
    // DDP 2 x 2 buckets/views, FSDP 2 shardings x 2 offloads, ZeRO 3 stages x 2 offloads;
    // 4 micro-batches; checkpointing off, every block, every 2nd block and op-level (selective).
    CHECK(one.size() == (4 + 4 + 6) * 4 * 4);
    CHECK(has(one, "activation_checkpointing=2"));
    const auto op = std::find_if(one.begin(), one.end(), [](const Candidate& c) {
        return c.label().find("activation_checkpointing=op") != std::string::npos;
    });
    REQUIRE(op != one.end());
    CHECK(op->config.activation_checkpointing);
    CHECK(op->config.ac_op);
    CHECK(op->config.ac_freq == 1);
}

TEST_CASE("advise turns to offload where nothing fits without it") {
    sim::Config base = base_config("llama2-13b", 1, 2);  // 13B with Adam on two 80 GB GPUs
    const auto candidates = enumerate(default_space(base, 8, calib::Calibration{}), base);
    const auto results = run_sweep(candidates, h100());
    const Ranking ranking = rank(results, {Objective::throughput, 0.10});
    REQUIRE_FALSE(ranking.order.empty());
    const std::string pick = results[ranking.order.front()].candidate.label();
    auto offloads = [](const std::string& label) {
        return label.find("offload_optimizer=cpu") != std::string::npos ||
               label.find("cpu_offload=true") != std::string::npos;
    };
    INFO(pick);
    CHECK(offloads(pick));
    for (const auto& r : results)
        if (r.fits && !offloads(r.candidate.label())) FAIL("fits without offload: " << r.candidate.label());
}

TEST_CASE("across nodes on TCP, advise tries NCCL's socket threads, and picks those that fill the NIC") {
    calib::Calibration eth = calib::load_hardware("h100-sxm");
    calib::use_socket_network(eth, calib::parse_socket_network("ethernet:1x100"));
    auto axis_names = [](const SearchSpace& s) {
        std::vector<std::string> names;
        for (const auto& a : s.axes) names.push_back(a.name);
        return names;
    };
    using Catch::Matchers::VectorContains;
    const SearchSpace across = default_space(base_config("gpt2", 4, 8), 256, eth);
    CHECK_THAT(axis_names(across), VectorContains(std::string("NCCL_SOCKET_NTHREADS")));
    CHECK_THAT(axis_names(across), VectorContains(std::string("NCCL_NSOCKS_PERTHREAD")));
    // One node never touches the NIC; an AWS ENA's own 2 x 8 already fills it;
    // a value the user set stays theirs.
    CHECK_FALSE(has_axis(default_space(base_config("gpt2", 1, 8), 64, eth), "NCCL_SOCKET_NTHREADS"));
    calib::Calibration aws = calib::load_hardware("h100-sxm");
    calib::use_socket_network(aws, calib::parse_socket_network("aws:1x100"));
    CHECK_FALSE(has_axis(default_space(base_config("gpt2", 4, 8), 256, aws), "NCCL_SOCKET_NTHREADS"));
    sim::Config pinned = base_config("gpt2", 4, 8);
    pinned.env = {{"NCCL_SOCKET_NTHREADS", "1"}};
    CHECK_FALSE(has_axis(default_space(pinned, 256, eth), "NCCL_NSOCKS_PERTHREAD"));

    // The sweep over that space: gpt2 DDP's allreduces cross the one NIC, and
    // 2 x 4 flows carry five times one flow's rate.
    const sim::Config base = base_config("gpt2", 4, 8);
    const auto results = run_sweep(enumerate(across, base), eth);
    const Ranking ranking = rank(results, {Objective::throughput, 0.10});
    REQUIRE_FALSE(ranking.order.empty());
    const Candidate& pick = results[ranking.order.front()].candidate;
    INFO(pick.label());
    CHECK_THAT(pick.label(), Catch::Contains("NCCL_SOCKET_NTHREADS=2") && Catch::Contains("NCCL_NSOCKS_PERTHREAD=4"));
    CHECK(pick.config.env == std::vector<std::pair<std::string, std::string>>{{"NCCL_SOCKET_NTHREADS", "2"},
                                                                              {"NCCL_NSOCKS_PERTHREAD", "4"}});
    // "default" leaves a variable unset; a value NCCL would refuse names the axis.
    const auto unset = enumerate(parse_axes({"NCCL_ALGO=default,ring"}), base);
    CHECK(unset[0].config.env.empty());
    CHECK(unset[1].config.env == std::vector<std::pair<std::string, std::string>>{{"NCCL_ALGO", "ring"}});
    CHECK_THROWS_WITH(parse_axes({"NCCL_SOCKET_NTHREADS=two"}),
                      Catch::Contains("axis 'NCCL_SOCKET_NTHREADS'") && Catch::Contains("whole number"));
    CHECK_THROWS_WITH(parse_axes({"NCCL_IB_HCA=mlx5"}), Catch::Contains("does not model"));
}
