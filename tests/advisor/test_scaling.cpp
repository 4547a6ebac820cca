// dtsim scale: the scaling curve and its SVG plot.
#include "dtsim/advisor/scaling.hpp"
#include "dtsim/advisor/svg_plot.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::advisor;

namespace {

const calib::Calibration& h100() {
    static const calib::Calibration cal = calib::load_hardware("h100-sxm");
    return cal;
}

sim::Config gpt2_ddp() {
    sim::Config c;
    c.model = "gpt2";
    c.strategy = "ddp";
    c.precision = sim::Precision::bf16_mixed;
    c.micro_batch = 8;
    c.seq_len = 256;
    return c;
}

std::size_t count_of(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
    return n;
}

// The x coordinates of every <polyline>'s points, one list per polyline.
std::vector<std::vector<double>> polyline_xs(const std::string& svg) {
    std::vector<std::vector<double>> out;
    const std::regex re("<polyline points=\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
        std::vector<double> xs;
        std::istringstream in((*it)[1].str());
        std::string pt;
        while (in >> pt) xs.push_back(std::stod(pt.substr(0, pt.find(','))));
        out.push_back(xs);
    }
    return out;
}

}  // namespace

TEST_CASE("scale: efficiency is 1 at the first GPU count and does not exceed 1 for ddp gpt2 8..128") {
    const auto r = run_scaling(gpt2_ddp(), {8, 16, 32, 64, 128}, 8, h100());
    REQUIRE(r.points.size() == 5);
    CHECK(r.baseline_gpus == 8);
    CHECK(r.points[0].efficiency == Approx(1.0));
    CHECK(r.points[0].topology.nodes == 1);
    CHECK(r.points[4].topology.nodes == 16);
    CHECK(r.points[4].topology.gpus_per_node == 8);
    for (const auto& p : r.points) {
        INFO(p.gpus << " GPUs: " << p.why);
        REQUIRE(p.simulated);
        CHECK(p.fits);
        CHECK(p.samples_per_s > 0);
        CHECK(p.efficiency > 0);
        CHECK(p.efficiency <= 1.02);
    }
}

TEST_CASE("scale: counts up to one node use one node of that many GPUs") {
    const auto t = scale_topology(4, 8);
    CHECK(t.nodes == 1);
    CHECK(t.gpus_per_node == 4);
    const auto t2 = scale_topology(32, 8);
    CHECK(t2.nodes == 4);
    CHECK(t2.gpus_per_node == 8);
}

TEST_CASE("scale: a GPU count that does not fill whole nodes is a ConfigError naming --gpus") {
    CHECK_THROWS_AS(scale_topology(12, 8), ConfigError);
    CHECK_THROWS_WITH(scale_topology(12, 8), Catch::Matchers::Contains("--gpus"));
    CHECK_THROWS_AS(run_scaling(gpt2_ddp(), {8, 12}, 8, h100()), ConfigError);
    CHECK_THROWS_WITH(run_scaling(gpt2_ddp(), {8, 12}, 8, h100()), Catch::Matchers::Contains("--gpus"));
    CHECK_THROWS_AS(parse_gpu_counts("8,,16"), ConfigError);
    CHECK_THROWS_WITH(parse_gpu_counts("8,,16"), Catch::Matchers::Contains("--gpus"));
    CHECK_THROWS_AS(parse_gpu_counts("8,0"), ConfigError);
    CHECK_THROWS_WITH(parse_gpu_counts("8,0"), Catch::Matchers::Contains("--gpus"));
    CHECK_THROWS_AS(parse_gpu_counts("8,x"), ConfigError);
    CHECK_THROWS_WITH(parse_gpu_counts("8,x"), Catch::Matchers::Contains("--gpus"));
    CHECK(parse_gpu_counts("8,16,1024") == std::vector<int>{8, 16, 1024});
}

TEST_CASE("scale: the SVG plot has one polyline per series with points increasing in x") {
    const auto r = run_scaling(gpt2_ddp(), {8, 16, 32, 64}, 8, h100());
    const std::string svg = render_svg(scaling_plot(r, "gpt2 <ddp> & bf16"));
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.ends_with("</svg>\n"));
    CHECK(count_of(svg, "<polyline") == 2);
    CHECK(svg.find("gpt2 &lt;ddp&gt; &amp; bf16") != std::string::npos);
    const auto lines = polyline_xs(svg);
    REQUIRE(lines.size() == 2);
    for (const auto& xs : lines) {
        REQUIRE(xs.size() == 4);
        for (std::size_t i = 1; i < xs.size(); ++i) CHECK(xs[i] > xs[i - 1]);
    }
}

TEST_CASE("scale: configurations that do not fit are left out of the plot") {
    ScaleResult r;
    r.baseline_gpus = 8;
    for (int g : {8, 16, 32}) {
        ScalePoint p;
        p.gpus = g;
        p.simulated = true;
        p.fits = g != 16;
        p.samples_per_s = g * 10.0;
        p.efficiency = 1.0;
        r.points.push_back(p);
    }
    const auto plot = scaling_plot(r, "t");
    REQUIRE(plot.series.size() == 2);
    CHECK(plot.series[0].points.size() == 2);
    CHECK(plot.series[1].points.size() == 2);
}
