// The sweep view: a table that sorts and filters, a scatter whose orange
// points are the advisor's Pareto front, and the selected row's timeline.
#include "dtsim/advisor/ranking.hpp"
#include "dtsim/advisor/search_space.hpp"
#include "dtsim/gui/sweep_view.hpp"
#include "dtsim/gui/timeline_pane.hpp"
#include "dtsim/gui/timeline_view.hpp"
#include "dtsim/profiler/presets.hpp"
#include "gui_test_support.hpp"

#include <QCheckBox>
#include <QHeaderView>
#include <QImage>
#include <QLineEdit>
#include <QTableView>
#include <QTest>

#include <catch2/catch.hpp>

#include <algorithm>

using namespace dtsim;

namespace {

sim::Config gpt2_base() {
    sim::Config c;
    c.model = "gpt2";
    c.topology = {1, 8};
    c.precision = sim::Precision::bf16_mixed;
    return c;
}

std::vector<advisor::SweepResult> gpt2_sweep(const calib::Calibration& cal) {
    // micro_batch 512 does not fit an H100; 1-64 do.
    const auto space = advisor::parse_axes({"strategy=ddp,fsdp", "micro_batch=1,8,64,512"});
    return advisor::run_sweep(advisor::enumerate(space, gpt2_base()), cal);
}

bool near(QColor a, QColor b) {
    return std::abs(a.red() - b.red()) < 30 && std::abs(a.green() - b.green()) < 30 &&
           std::abs(a.blue() - b.blue()) < 30;
}

}  // namespace

TEST_CASE("the sweep view sorts, filters, marks the Pareto front and shows the selected row's timeline", "[gui]") {
    test::gui_app();
    const calib::Calibration cal = calib::load_hardware("h100-sxm");
    const auto results = gpt2_sweep(cal);
    REQUIRE(results.size() == 8);
    gui::SweepView view(results, cal, true, QStringLiteral("gpt2 sweep"));
    view.resize(1400, 900);
    view.show();
    QApplication::processEvents();

    // It opens on the advisor's recommendation, with its timeline.
    const advisor::Ranking ranking = advisor::rank(results, {});
    REQUIRE(view.selected_row() == ranking.order.front());
    CHECK(view.pareto() == ranking.pareto);
    REQUIRE(view.timeline()->view()->index());
    CHECK(view.selection_text().startsWith(QString::fromStdString(results[ranking.order.front()].candidate.label())));

    // Sorting by samples/s (column 3) descending puts the fastest first.
    view.table()->sortByColumn(3, Qt::DescendingOrder);
    const auto rows = view.shown_rows();
    REQUIRE(rows.size() == results.size());
    for (std::size_t i = 1; i < rows.size(); ++i)
        if (results[rows[i]].simulated) CHECK(results[rows[i - 1]].samples_per_s >= results[rows[i]].samples_per_s);

    // The filter matches any column; "fits only" drops micro_batch=512.
    view.filter_box()->setText(QStringLiteral("fsdp"));
    CHECK(view.shown_rows().size() == 4);
    for (std::size_t i : view.shown_rows()) CHECK(results[i].candidate.strategy == "fsdp");
    view.filter_box()->clear();
    view.fits_only()->setChecked(true);
    for (std::size_t i : view.shown_rows()) CHECK(results[i].fits);
    CHECK(view.shown_rows().size() == static_cast<std::size_t>(std::count_if(results.begin(), results.end(),
                                                                             [](const auto& r) { return r.fits; })));
    view.fits_only()->setChecked(false);

    // The scatter: a front point is orange where it is drawn; a click on a
    // point selects its row and simulates its timeline.
    QApplication::processEvents();
    const QImage image = view.scatter()->grab().toImage();
    const QPointF front = view.scatter()->point_of(ranking.pareto.front());
    CHECK(near(image.pixelColor(front.toPoint()), QColor(0xff, 0x7f, 0x0e)));
    // The slowest configuration drawn apart from every other point (10 px).
    auto apart = [&](std::size_t i) {
        if (!results[i].simulated) return false;
        for (std::size_t j = 0; j < results.size(); ++j) {
            const QPointF d = view.scatter()->point_of(i) - view.scatter()->point_of(j);
            if (j != i && results[j].simulated && d.x() * d.x() + d.y() * d.y() < 100) return false;
        }
        return true;
    };
    const auto slowest = std::find_if(rows.rbegin(), rows.rend(), apart);
    REQUIRE(slowest != rows.rend());
    const std::size_t slow = *slowest;
    REQUIRE(slow != view.selected_row());
    QTest::mouseClick(view.scatter(), Qt::LeftButton, {}, view.scatter()->point_of(slow).toPoint());
    CHECK(view.selected_row() == slow);
    CHECK(view.selection_text().startsWith(QString::fromStdString(results[slow].candidate.label())));
    REQUIRE(view.timeline()->view()->index());
    CHECK(view.timeline()->view()->index()->ranks().size() >= 1);
    // The table follows the scatter.
    const auto current = view.table()->currentIndex();
    REQUIRE(current.isValid());
    CHECK(view.shown_rows()[static_cast<std::size_t>(current.row())] == slow);
}

TEST_CASE("a sweep file without its base configuration shows figures and says how to get the timelines", "[gui]") {
    test::gui_app();
    const calib::Calibration cal = calib::load_hardware("h100-sxm");
    const auto results = advisor::parse_sweep_json(advisor::sweep_json(gpt2_sweep(cal)), "sweep.json", nullptr);
    gui::SweepView view(results, {}, false, QStringLiteral("sweep.json"));
    view.resize(1200, 800);
    CHECK(view.shown_rows().size() == results.size());
    CHECK_FALSE(view.timeline()->view()->index());
    CHECK(view.selection_text().contains(QStringLiteral("--model")));
}
