#include "dtsim/gui/compare_view.hpp"

#include "dtsim/gui/style.hpp"
#include "dtsim/gui/timeline_view.hpp"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace dtsim::gui {
namespace {

const QColor kUnmatched(0x5a, 0x5a, 0x5a);

QString percent(double fraction) {
    return (fraction > 0 ? QStringLiteral("+") : QString()) + QString::number(fraction * 100, 'f', 1) +
           QStringLiteral(" %");
}

}  // namespace

QColor error_color(double error) {
    // Linear from grey (0) to full blue (-50 %) or red (+50 % and more).
    const double t = std::clamp(std::fabs(error) / 0.5, 0.0, 1.0);
    const QColor neutral(0xc8, 0xc8, 0xc8);
    const QColor extreme = error < 0 ? QColor(0x21, 0x66, 0xac) : QColor(0xd6, 0x27, 0x28);
    const auto mix = [t](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
    return QColor(mix(neutral.red(), extreme.red()), mix(neutral.green(), extreme.green()),
                  mix(neutral.blue(), extreme.blue()));
}

CompareView::CompareView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    auto* split = new QSplitter(Qt::Vertical, this);
    const auto add_view = [&](QLabel*& label, TimelineView*& view) {
        auto* box = new QWidget(split);
        auto* l = new QVBoxLayout(box);
        l->setContentsMargins(0, 0, 0, 0);
        l->setSpacing(2);
        label = new QLabel(box);
        QFont bold = label->font();
        bold.setBold(true);
        label->setFont(bold);
        view = new TimelineView(box);
        l->addWidget(label);
        l->addWidget(view, 1);
        split->addWidget(box);
    };
    add_view(predicted_label_, predicted_);
    add_view(measured_label_, measured_);

    auto* bottom = new QWidget(split);
    auto* bl = new QVBoxLayout(bottom);
    bl->setContentsMargins(0, 0, 0, 0);
    totals_ = new QLabel(bottom);
    summary_ = new QTableWidget(bottom);
    summary_->setColumnCount(6);
    summary_->setHorizontalHeaderLabels(
        {tr("kind"), tr("matched"), tr("predicted"), tr("measured"), tr("error of sum"), tr("median |error|")});
    summary_->verticalHeader()->hide();
    summary_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    summary_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    bl->addWidget(totals_);
    bl->addWidget(summary_, 1);
    split->addWidget(bottom);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 2);
    layout->addWidget(split);

    connect(predicted_, &TimelineView::window_changed, this,
            [this](double t0, double npp) { follow(predicted_, measured_, t0, npp); });
    connect(measured_, &TimelineView::window_changed, this,
            [this](double t0, double npp) { follow(measured_, predicted_, t0, npp); });
}

void CompareView::follow(TimelineView* from, TimelineView* to, double t0_ns, double ns_per_px) {
    if (following_ || !from->index() || !to->index()) return;
    following_ = true;
    // One time axis: both traces measured from their own first event.
    to->set_window(t0_ns - static_cast<double>(from->index()->begin_ns()) + static_cast<double>(to->index()->begin_ns()),
                   ns_per_px);
    following_ = false;
}

void CompareView::fit_all() {
    if (!predicted_->index() || !measured_->index()) return;
    // Both on the longer trace's scale, so equal times line up.
    const auto length = [](const TimelineView* v) { return v->index()->end_ns() - v->index()->begin_ns(); };
    (length(predicted_) >= length(measured_) ? predicted_ : measured_)->fit_all();
}

void CompareView::set_traces(std::shared_ptr<const TimelineIndex> predicted,
                             std::shared_ptr<const TimelineIndex> measured, const QString& predicted_name,
                             const QString& measured_name) {
    comparison_ = compare_traces(predicted->model(), measured->model());
    predicted_label_->setText(tr("Predicted: %1").arg(predicted_name));
    measured_label_->setText(tr("Measured: %1").arg(measured_name));

    std::vector<QRgb> p_colors(predicted->model().spans.size(), kUnmatched.rgba());
    std::vector<QRgb> m_colors(measured->model().spans.size(), kUnmatched.rgba());
    for (const auto& match : comparison_.matches) {
        const QRgb c = error_color(match.error).rgba();
        p_colors[static_cast<std::size_t>(match.predicted)] = c;
        m_colors[static_cast<std::size_t>(match.measured)] = c;
    }
    const std::vector<std::pair<QString, QColor>> legend = {
        {tr("measured 50 % faster"), error_color(-0.5)}, {tr("-20 %"), error_color(-0.2)},
        {tr("as predicted"), error_color(0)},            {tr("+20 %"), error_color(0.2)},
        {tr("50 % slower"), error_color(0.5)},           {tr("unmatched"), kUnmatched}};
    following_ = true;
    predicted_->set_index(std::move(predicted));
    measured_->set_index(std::move(measured));
    following_ = false;
    predicted_->set_span_colors(std::move(p_colors), legend);
    measured_->set_span_colors(std::move(m_colors), legend);
    fit_all();
    const double p_len = static_cast<double>(predicted_->index()->end_ns() - predicted_->index()->begin_ns());
    const double m_len = static_cast<double>(measured_->index()->end_ns() - measured_->index()->begin_ns());

    summary_->setRowCount(static_cast<int>(comparison_.kinds.size()));
    int row = 0;
    for (const auto& k : comparison_.kinds) {
        const QStringList cells = {kind_name(k.kind),
                                   QString::number(k.matched),
                                   format_duration(k.predicted_ns),
                                   format_duration(k.measured_ns),
                                   percent(k.total_error),
                                   QString::number(k.median_abs_error * 100, 'f', 1) + QStringLiteral(" %")};
        for (int c = 0; c < cells.size(); ++c) summary_->setItem(row, c, new QTableWidgetItem(cells[c]));
        summary_->item(row, 4)->setBackground(error_color(k.total_error));
        summary_->item(row, 4)->setForeground(QColor(0x20, 0x20, 0x20));
        ++row;
    }
    totals_->setText(tr("%1 spans matched by rank, track, name and order; %2 predicted and %3 measured unmatched. "
                        "Trace length: predicted %4, measured %5 (%6).")
                         .arg(comparison_.matches.size())
                         .arg(comparison_.unmatched_predicted)
                         .arg(comparison_.unmatched_measured)
                         .arg(format_duration(p_len), format_duration(m_len), percent(p_len > 0 ? m_len / p_len - 1 : 0)));
}

}  // namespace dtsim::gui
