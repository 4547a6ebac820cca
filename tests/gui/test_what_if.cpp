// The live what-if: a knob change re-simulates and the labels say what it did.
#include "dtsim/gui/compare.hpp"
#include "dtsim/gui/compare_view.hpp"
#include "dtsim/gui/timeline_pane.hpp"
#include "dtsim/gui/timeline_view.hpp"
#include "dtsim/gui/what_if.hpp"
#include "dtsim/profiler/presets.hpp"
#include "gui_test_support.hpp"

#include <QComboBox>
#include <QSignalSpy>
#include <QTableWidget>

#include <catch2/catch.hpp>

using namespace dtsim;
using traces::SpanKind;

namespace {

sim::Config gpt2_ddp() {
    sim::Config c;
    c.model = "gpt2";
    c.strategy = "ddp";
    c.topology = {2, 8};
    c.micro_batch = 4;
    c.precision = sim::Precision::bf16_mixed;
    return c;
}

}  // namespace

TEST_CASE("changing a knob re-simulates and the step-time label changes", "[gui]") {
    test::gui_app();
    gui::WhatIfPanel panel(gpt2_ddp(), calib::load_hardware("h100-sxm"));
    panel.resize(1400, 700);
    REQUIRE(panel.outcome().valid);
    REQUIRE(panel.outcome().fits);
    const QString before = panel.step_time_text();
    const double step_before = panel.outcome().step_time_s;
    CHECK(panel.status_text().startsWith(QStringLiteral("Fits")));

    QSignalSpy simulated(&panel, &gui::WhatIfPanel::simulated);
    REQUIRE(panel.set_control(QStringLiteral("micro_batch"), QStringLiteral("16")));
    CHECK(simulated.count() == 1);
    CHECK(panel.config().micro_batch == 16);
    CHECK(panel.outcome().step_time_s > step_before);
    CHECK(panel.step_time_text() != before);
    CHECK(panel.step_time_text().contains(QStringLiteral("was")));

    SECTION("a strategy knob by its torch name") {
        const double step = panel.outcome().step_time_s;
        REQUIRE(panel.set_control(QStringLiteral("bucket_cap_mb"), QStringLiteral("200")));
        CHECK(panel.config().knobs.back() == std::pair<std::string, std::string>{"bucket_cap_mb", "200"});
        CHECK(panel.outcome().step_time_s != step);
    }
    SECTION("switching strategy offers its knobs") {
        REQUIRE(panel.set_control(QStringLiteral("strategy"), QStringLiteral("fsdp")));
        CHECK(panel.config().strategy == "fsdp");
        CHECK(panel.set_control(QStringLiteral("sharding_strategy"), QStringLiteral("SHARD_GRAD_OP")));
        CHECK_FALSE(panel.set_control(QStringLiteral("bucket_cap_mb"), QStringLiteral("50")));
        CHECK(panel.outcome().valid);
    }
    SECTION("fsdp2 offers reshard_after_forward, and keeping parameters after forward costs memory") {
        REQUIRE(panel.set_control(QStringLiteral("strategy"), QStringLiteral("fsdp2")));
        CHECK_FALSE(panel.set_control(QStringLiteral("sharding_strategy"), QStringLiteral("SHARD_GRAD_OP")));
        const auto resharded = panel.outcome().peak_memory_bytes;
        REQUIRE(panel.set_control(QStringLiteral("reshard_after_forward"), QStringLiteral("false")));
        CHECK(panel.config().knobs.back() == std::pair<std::string, std::string>{"reshard_after_forward", "false"});
        CHECK(panel.outcome().peak_memory_bytes > resharded);
    }
    SECTION("a configuration that does not fit is a clear state, not an error") {
        REQUIRE(panel.set_control(QStringLiteral("micro_batch"), QStringLiteral("512")));
        CHECK(panel.outcome().valid);
        CHECK_FALSE(panel.outcome().fits);
        CHECK(panel.status_text().startsWith(QStringLiteral("Does not fit: needs")));
        CHECK(panel.status_text().contains(QStringLiteral("over by")));
    }
}

TEST_CASE("compare matches spans by rank and track and name and order and reports the error per kind", "[gui]") {
    test::gui_app();
    const auto make = [](double scale_compute, double scale_comm, bool extra) {
        test::ModelBuilder b;
        b.rank(0);
        const auto c = b.track(0, "compute"), n = b.track(0, "comm");
        for (int i = 0; i < 4; ++i)
            b.span(c, "gemm", SpanKind::compute, i * 1000, static_cast<std::int64_t>(800 * scale_compute));
        b.span(n, "allreduce", SpanKind::communication, 500, static_cast<std::int64_t>(2000 * scale_comm));
        if (extra) b.span(n, "barrier", SpanKind::communication, 4000, 10);
        return std::make_shared<gui::TimelineIndex>(b.build());
    };
    const auto predicted = make(1.0, 1.0, false);
    const auto measured = make(1.25, 0.5, true);
    const gui::Comparison c = gui::compare_traces(predicted->model(), measured->model());
    CHECK(c.matches.size() == 5);
    CHECK(c.unmatched_predicted == 0);
    CHECK(c.unmatched_measured == 1);
    REQUIRE(c.kinds.size() == 2);
    CHECK(c.kinds[0].kind == SpanKind::compute);
    CHECK(c.kinds[0].matched == 4);
    CHECK(c.kinds[0].total_error == Approx(0.25));
    CHECK(c.kinds[1].total_error == Approx(-0.5));

    gui::CompareView view;
    view.resize(1200, 800);
    view.set_traces(predicted, measured, QStringLiteral("p"), QStringLiteral("m"));
    CHECK(view.summary()->rowCount() == 2);
    CHECK(view.summary()->item(0, 4)->text() == QStringLiteral("+25.0 %"));
    // Hovering a span says predicted against measured.
    view.show();
    view.fit_all();
    const auto gemm = view.measured_view()->span_rect(0);
    REQUIRE(gemm);
    const QString tip = view.measured_view()->tooltip_at(gemm->center().toPoint());
    CHECK(tip.contains(QStringLiteral("predicted 800 ns, measured 1.000 us (+25.0 %)")));
    // Zooming one view moves the other: one time axis.
    view.predicted_view()->zoom_at(2, 100);
    CHECK(view.measured_view()->ns_per_px() == Approx(view.predicted_view()->ns_per_px()));
    CHECK(gui::error_color(0.0) != gui::error_color(0.5));
    CHECK(gui::error_color(-0.5).blue() > gui::error_color(-0.5).red());
}

TEST_CASE("a predicted representative rank is matched against every measured rank", "[gui]") {
    test::ModelBuilder p;
    p.rank(0);
    const auto pc = p.track(0, "compute");
    p.span(pc, "gemm", SpanKind::compute, 0, 1000);
    test::ModelBuilder m;
    m.rank(0).rank(1);
    m.span(m.track(0, "compute"), "gemm", SpanKind::compute, 0, 1100);
    m.span(m.track(1, "compute"), "gemm", SpanKind::compute, 0, 900);
    const gui::Comparison c = gui::compare_traces(*p.build(), *m.build());
    REQUIRE(c.matches.size() == 2);
    CHECK(c.unmatched_measured == 0);
    CHECK(c.unmatched_predicted == 0);
    CHECK(c.matches[0].error == Approx(0.1));
    CHECK(c.matches[1].error == Approx(-0.1));
    CHECK(c.kinds.at(0).total_error == Approx(0.0));
}

TEST_CASE("a measured trace of three steps is compared one step at a time, each lined up with the prediction",
          "[gui]") {
    test::gui_app();
    // Predicted: one step of 4 GEMMs and an allreduce in 4 us.
    test::ModelBuilder p;
    p.rank(0);
    const auto pc = p.track(0, "compute"), pn = p.track(0, "comm");
    for (int i = 0; i < 4; ++i) p.span(pc, "gemm", SpanKind::compute, i * 1000, 800);
    p.span(pn, "allreduce", SpanKind::communication, 500, 2000);
    // Measured: three steps 10 us apart; step k's GEMMs take 800 * (1 + k/4) ns.
    test::ModelBuilder m;
    m.rank(0);
    const auto mc = m.track(0, "compute"), mn = m.track(0, "comm");
    for (int step = 0; step < 3; ++step) {
        const std::int64_t t0 = 50'000 + step * 10'000;
        for (int i = 0; i < 4; ++i) m.span(mc, "gemm", SpanKind::compute, t0 + i * 1000, 800 + 200 * step);
        m.span(mn, "allreduce", SpanKind::communication, t0 + 500, 2000);
    }
    const auto predicted = std::make_shared<gui::TimelineIndex>(p.build());
    const auto measured = std::make_shared<gui::TimelineIndex>(m.build());
    CHECK(gui::measured_step_count(predicted->model(), measured->model()) == 3);
    for (int step = 0; step < 3; ++step) {
        const gui::Comparison c = gui::compare_traces(predicted->model(), measured->model(), step);
        CHECK(c.matches.size() == 5);
        CHECK(c.unmatched_measured == 10);
        REQUIRE(c.kinds.size() == 2);
        CHECK(c.kinds[0].total_error == Approx(0.25 * step));
    }
    CHECK(gui::compare_traces(predicted->model(), measured->model(), 3).matches.empty());

    gui::CompareView view;
    view.resize(1200, 800);
    view.show();
    view.set_traces(predicted, measured, QStringLiteral("p"), QStringLiteral("m"));
    CHECK(view.measured_steps() == 3);
    CHECK(view.measured_step() == 0);
    view.set_measured_step(2);
    CHECK(view.measured_step() == 2);
    CHECK(view.summary()->item(0, 4)->text() == QStringLiteral("+50.0 %"));
    CHECK(view.totals_text().startsWith(QStringLiteral("Measured step 3 of 3")));
    // The third step's first GEMM is drawn where the predicted first GEMM is.
    const double predicted_x = view.predicted_view()->x_of_time(0);
    CHECK(view.measured_view()->x_of_time(70'000) == Approx(predicted_x).margin(1));
    view.set_measured_step(7);  // clamped
    CHECK(view.measured_step() == 2);
}
