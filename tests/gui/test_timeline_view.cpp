// TimelineView rendered offscreen into an image: lanes, colours at known
// pixels, the tooltip of a known task, selection, search, zoom and collapse.
#include "dtsim/gui/style.hpp"
#include "dtsim/gui/timeline_pane.hpp"
#include "dtsim/gui/timeline_view.hpp"
#include "dtsim/gui/trace_source.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/timeline.hpp"
#include "gui_test_support.hpp"

#include <QImage>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QTest>

#include <catch2/catch.hpp>

using namespace dtsim;
using dtsim::gui::TimelineIndex;
using dtsim::gui::TimelineView;
using traces::SpanKind;

namespace {

struct KnownTrace {
    std::shared_ptr<const TimelineIndex> index;
    std::int32_t forward = -1, allreduce = -1, rank1_compute = -1;
};

// Two ranks with a compute and a comm stream each, 0..10 us, and a memory counter.
KnownTrace known_trace() {
    test::ModelBuilder b;
    b.rank(0).rank(1);
    KnownTrace k;
    const auto r0c = b.track(0, "compute"), r0n = b.track(0, "comm"), r1c = b.track(1, "compute"),
               r1n = b.track(1, "comm");
    k.forward = b.span(r0c, "forward h.3", SpanKind::compute, 0, 4000, {{"layer", "h.3"}, {"micro_step", "0"}});
    b.span(r0c, "backward h.3", SpanKind::compute, 4000, 4000);
    k.allreduce = b.span(r0n, "allreduce bucket 2", SpanKind::communication, 5000, 5000,
                         {{"bucket", "2"}, {"bytes", "26214400"}});
    k.rank1_compute = b.span(r1c, "forward h.3", SpanKind::compute, 0, 8000);
    b.span(r1n, "allreduce bucket 2", SpanKind::communication, 5000, 5000);
    b.counter(0, "device memory", 0, 1e9);
    b.counter(0, "device memory", 6000, 3e9);
    b.counter(0, "device memory", 9000, 2e9);
    k.index = std::make_shared<TimelineIndex>(b.build());
    return k;
}

QImage render(QWidget& w) {
    QImage image(w.size(), QImage::Format_ARGB32);
    image.fill(Qt::black);
    w.render(&image);
    return image;
}

QPoint centre(const QRectF& r) { return r.center().toPoint(); }

}  // namespace

TEST_CASE("a known timeline renders a lane per rank and track coloured by kind", "[gui]") {
    test::gui_app();
    const KnownTrace k = known_trace();
    TimelineView view;
    view.resize(1000, 400);
    view.set_index(k.index);
    CHECK(view.visible_lane_count() == 4);
    const QImage image = render(view);

    const auto forward = view.span_rect(k.forward);
    const auto allreduce = view.span_rect(k.allreduce);
    REQUIRE(forward);
    REQUIRE(allreduce);
    // The window fits 0..10 us with a 1 % margin on each side.
    CHECK(forward->left() == Approx(TimelineView::kGutterPx + 0.01 / 1.02 * view.plot_width_px()).margin(1));
    CHECK(forward->width() == Approx(0.4 / 1.02 * view.plot_width_px()).margin(1));
    CHECK(allreduce->top() > forward->bottom());  // comm lane below compute lane

    // Pixels inside the spans (away from their labels) have the kinds' colours.
    const QPoint in_forward(static_cast<int>(forward->right()) - 3, static_cast<int>(forward->bottom()) - 2);
    const QPoint in_allreduce(static_cast<int>(allreduce->right()) - 3, static_cast<int>(allreduce->bottom()) - 2);
    CHECK(QColor(image.pixel(in_forward)) == gui::kind_color(SpanKind::compute));
    CHECK(QColor(image.pixel(in_allreduce)) == gui::kind_color(SpanKind::communication));
    // Before the allreduce starts its lane is background.
    const QPoint before_allreduce(static_cast<int>(forward->left()) + 5, in_allreduce.y());
    CHECK(QColor(image.pixel(before_allreduce)) == view.palette().color(QPalette::Base));

    SECTION("collapsing a rank hides its lanes") {
        view.set_rank_collapsed(1, true);
        CHECK(view.visible_lane_count() == 2);
        CHECK_FALSE(view.span_rect(k.rank1_compute));
        view.set_rank_collapsed(1, false);
        CHECK(view.visible_lane_count() == 4);
    }
}

TEST_CASE("hovering a known task shows its name and category and duration and args", "[gui]") {
    test::gui_app();
    const KnownTrace k = known_trace();
    TimelineView view;
    view.resize(1000, 400);
    view.set_index(k.index);
    const QString tip = view.tooltip_at(centre(*view.span_rect(k.allreduce)));
    CHECK(tip.startsWith(QStringLiteral("allreduce bucket 2\n")));
    CHECK(tip.contains(QStringLiteral("category: collective (communication)")));
    CHECK(tip.contains(QStringLiteral("duration: 5.000 us, start 5.000 us")));
    CHECK(tip.contains(QStringLiteral("bucket: 2")));
    CHECK(tip.contains(QStringLiteral("bytes: 25.0 MiB (26214400)")));
    CHECK(view.tooltip_at(centre(*view.span_rect(k.forward))).contains(QStringLiteral("layer: h.3")));
    CHECK(view.tooltip_at(QPoint(5, 5)).isEmpty());  // the legend
}

TEST_CASE("click selects into the details pane and slash searches and keys zoom and pan", "[gui]") {
    test::gui_app();
    const KnownTrace k = known_trace();
    gui::TimelinePane pane;
    pane.resize(1200, 500);
    pane.show();
    pane.set_index(k.index);
    TimelineView& view = *pane.view();

    QTest::mouseClick(&view, Qt::LeftButton, {}, centre(*view.span_rect(k.allreduce)));
    CHECK(view.selected_span() == k.allreduce);
    CHECK(pane.details_text().contains(QStringLiteral("allreduce bucket 2")));

    QSignalSpy search_requested(&view, &TimelineView::search_requested);
    QTest::keyClick(&view, Qt::Key_Slash);
    CHECK(search_requested.count() == 1);  // the pane focuses its search box
    pane.search_box()->setText(QStringLiteral("ALLREDUCE"));
    CHECK(view.match_count() == 2);
    pane.search_box()->clear();
    CHECK(view.match_count() == 0);

    // Next and previous match, in time order (ties by span), wrapping round; each is selected and centred.
    pane.search_box()->setText(QStringLiteral("h.3"));
    CHECK(pane.match_text() == QStringLiteral("3 matches"));
    QTest::keyClick(pane.search_box(), Qt::Key_Return);
    CHECK(view.selected_span() == k.forward);
    CHECK(pane.match_text() == QStringLiteral("1 of 3"));
    CHECK(pane.details_text().contains(QStringLiteral("forward h.3")));
    QTest::keyClick(&view, Qt::Key_N);
    CHECK(view.selected_span() == k.rank1_compute);
    pane.step_match(1);
    const std::int32_t backward = view.selected_span();
    CHECK(pane.match_text() == QStringLiteral("3 of 3"));
    REQUIRE(view.span_rect(backward));
    CHECK(view.span_rect(backward)->center().x() == Approx(view.x_of_time(6000)).margin(1));
    CHECK(view.x_of_time(6000) == Approx(view.x_of_time(view.t0_ns()) + view.plot_width_px() / 2.0).margin(1));
    QTest::keyClick(&view, Qt::Key_N);
    CHECK(view.selected_span() == k.forward);  // wrapped
    QTest::keyClick(&view, Qt::Key_N, Qt::ShiftModifier);
    CHECK(view.selected_span() == backward);
    pane.search_box()->setText(QStringLiteral("no such span"));
    CHECK(pane.match_text() == QStringLiteral("no match"));
    CHECK_FALSE(view.step_match(1));
    pane.search_box()->clear();

    // W zooms in around the centre, S back out, F fits everything.
    const double fit = view.ns_per_px();
    const double centre_t = view.t0_ns() + view.plot_width_px() / 2.0 * fit;
    QTest::keyClick(&view, Qt::Key_W);
    CHECK(view.ns_per_px() == Approx(fit / 1.5));
    CHECK(view.t0_ns() + view.plot_width_px() / 2.0 * view.ns_per_px() == Approx(centre_t));
    QTest::keyClick(&view, Qt::Key_D);
    CHECK(view.t0_ns() > centre_t - view.plot_width_px() / 2.0 * view.ns_per_px());
    QTest::keyClick(&view, Qt::Key_F);
    CHECK(view.ns_per_px() == Approx(fit));

    // Zooming around a point keeps the time under it in place.
    const double x = 300;
    const double t_at_x = view.t0_ns() + x * view.ns_per_px();
    view.zoom_at(4, x);
    CHECK(view.t0_ns() + x * view.ns_per_px() == Approx(t_at_x));
}

TEST_CASE("a simulated step shows one lane per stream and the device-memory track", "[gui]") {
    test::gui_app();
    sim::Config c;
    c.model = "gpt2";
    c.topology = {1, 8};
    c.micro_batch = 4;
    const auto cal = calib::load_hardware("h100-sxm");
    const sim::SimResult r = sim::simulate(c, cal);
    const sim::Timeline tl = sim::make_timeline(r, c, cal.name);
    auto index = std::make_shared<TimelineIndex>(gui::model_from_timeline(tl));
    CHECK(index->lanes().size() == tl.streams.size());
    REQUIRE(index->counters().size() >= 1);
    CHECK(index->counters()[0].name == "device memory");
    CHECK(index->counters()[0].value[index->counters()[0].peak] == Approx(static_cast<double>(r.metrics.peak_memory_bytes)));
    TimelineView view;
    view.resize(1200, 500);
    view.set_index(index);
    CHECK(view.visible_lane_count() == static_cast<int>(tl.streams.size()));
    const QImage image = render(view);
    // Something other than background is drawn in the first lane.
    const int y = TimelineView::kLegendPx + TimelineView::kRulerPx + TimelineView::kRankHeaderPx + TimelineView::kRowPx / 2;
    int painted = 0;
    for (int x = TimelineView::kGutterPx; x < image.width(); ++x)
        if (QColor(image.pixel(x, y)) == gui::kind_color(SpanKind::compute)) ++painted;
    CHECK(painted > view.plot_width_px() / 4);
    // The memory track's tooltip gives the peak's breakdown by category.
    QString memory_tip;
    for (int yy = 0; yy < view.height() && memory_tip.isEmpty(); ++yy)
        if (view.tooltip_at(QPoint(TimelineView::kGutterPx + 10, yy)).startsWith(QStringLiteral("device memory")))
            memory_tip = view.tooltip_at(QPoint(TimelineView::kGutterPx + 10, yy));
    REQUIRE_FALSE(tl.device_memory_peak.empty());
    for (const auto& [category, bytes] : tl.device_memory_peak)
        CHECK(memory_tip.contains(QString::fromStdString(category).replace(QLatin1Char('_'), QLatin1Char(' ')) +
                                  QStringLiteral(" ") + gui::format_bytes(static_cast<double>(bytes))));

    // Selecting a task that waits for others lists them and draws an arrow into it.
    const auto& spans = index->model().spans;
    std::int32_t waiting = -1, dependency = -1;
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(spans.size()) && waiting < 0; ++i) {
        // One on another lane, ending well before it starts, so that the arrow has length.
        for (const std::int32_t d : view.dependencies_of(i))
            if (spans[static_cast<std::size_t>(d)].track != spans[static_cast<std::size_t>(i)].track &&
                view.span_rect(d)->right() + 30 < view.span_rect(i)->left()) {
                waiting = i;
                dependency = d;
            }
    }
    REQUIRE(waiting >= 0);
    view.select_span(waiting);
    const QString details = gui::span_description(*index, waiting);
    CHECK(details.contains(QStringLiteral("waits for")));
    const QImage with_arrows = render(view);
    view.select_span(-1);
    const QImage without = render(view);
    // Between the dependency's end and the waiting span's start only the arrow differs.
    const int x0 = static_cast<int>(view.span_rect(dependency)->right()) + 3;
    const int x1 = static_cast<int>(view.span_rect(waiting)->left()) - 12;
    int changed = 0;
    for (int yy = TimelineView::kLegendPx + TimelineView::kRulerPx; yy < with_arrows.height(); ++yy)
        for (int x = x0; x < x1; ++x)
            if (with_arrows.pixel(x, yy) != without.pixel(x, yy)) ++changed;
    CHECK(changed >= (x1 - x0) / 2);
}
