#include "dtsim/gui/compare_view.hpp"

#include "dtsim/gui/style.hpp"
#include "dtsim/gui/timeline_view.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace dtsim::gui {
namespace {

using traces::TraceModel;

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
    // The measured step to compare, beside the measured trace's name.
    step_label_ = new QLabel(tr("measured step"), this);
    step_box_ = new QSpinBox(this);
    step_box_->setMinimum(1);
    auto* measured_bar = new QHBoxLayout;
    measured_bar->setContentsMargins(0, 0, 0, 0);
    auto* measured_box = measured_label_->parentWidget();
    static_cast<QVBoxLayout*>(measured_box->layout())->removeWidget(measured_label_);
    measured_bar->addWidget(measured_label_, 1);
    measured_bar->addWidget(step_label_);
    measured_bar->addWidget(step_box_);
    static_cast<QVBoxLayout*>(measured_box->layout())->insertLayout(0, measured_bar);
    connect(step_box_, &QSpinBox::valueChanged, this, [this](int value) { set_measured_step(value - 1); });

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
    // One time axis: the predicted trace from its first event, the measured
    // one from the start of the step compared.
    to->set_window(t0_ns - origin_ns(from) + origin_ns(to), ns_per_px);
    following_ = false;
}

double CompareView::origin_ns(const TimelineView* view) const {
    return view == measured_ ? measured_origin_ns_ : static_cast<double>(view->index()->begin_ns());
}

void CompareView::fit_all() {
    if (!predicted_->index() || !measured_->index()) return;
    // A later step: the prediction fills the width and the step follows it.
    // Else both on the longer trace's scale, so equal times line up.
    const auto length = [](const TimelineView* v) { return v->index()->end_ns() - v->index()->begin_ns(); };
    TimelineView* lead = step_ > 0 || length(predicted_) >= length(measured_) ? predicted_ : measured_;
    lead->fit_all();
    // The other follows even when the fit left the lead's window as it was (no signal then).
    follow(lead, lead == predicted_ ? measured_ : predicted_, lead->t0_ns(), lead->ns_per_px());
}

QString CompareView::totals_text() const {
    return totals_->text();
}

void CompareView::set_measured_step(int step) {
    if (!predicted_->index() || !measured_->index()) return;  // nothing to compare yet
    step_ = std::clamp(step, 0, steps_ - 1);
    {
        const QSignalBlocker block(step_box_);
        step_box_->setValue(step_ + 1);
    }
    compare_step();
    fit_all();
}

void CompareView::set_traces(std::shared_ptr<const TimelineIndex> predicted,
                             std::shared_ptr<const TimelineIndex> measured, const QString& predicted_name,
                             const QString& measured_name) {
    predicted_label_->setText(tr("Predicted: %1").arg(predicted_name));
    measured_label_->setText(tr("Measured: %1").arg(measured_name));
    matcher_.emplace(predicted->model(), measured->model());  // the views below keep both models alive
    steps_ = matcher_->measured_steps();
    step_ = 0;
    step_box_->setMaximum(steps_);
    step_box_->setSuffix(tr(" of %1").arg(steps_));
    step_box_->setVisible(steps_ > 1);
    step_label_->setVisible(steps_ > 1);
    following_ = true;
    predicted_->set_index(std::move(predicted));
    measured_->set_index(std::move(measured));
    following_ = false;
    set_measured_step(0);
}

void CompareView::compare_step() {
    const TraceModel& predicted = predicted_->index()->model();
    const TraceModel& measured = measured_->index()->model();
    comparison_ = matcher_->compare(step_);
    // The step's origin: its first matched span, placed where its prediction starts.
    measured_origin_ns_ = static_cast<double>(measured_->index()->begin_ns());
    if (step_ > 0 && !comparison_.matches.empty()) {
        const auto first = std::min_element(comparison_.matches.begin(), comparison_.matches.end(),
                                            [&](const SpanMatch& a, const SpanMatch& b) {
                                                return measured.spans[static_cast<std::size_t>(a.measured)].start_ns <
                                                       measured.spans[static_cast<std::size_t>(b.measured)].start_ns;
                                            });
        measured_origin_ns_ = static_cast<double>(measured.spans[static_cast<std::size_t>(first->measured)].start_ns) -
                              static_cast<double>(predicted.spans[static_cast<std::size_t>(first->predicted)].start_ns -
                                                  predicted_->index()->begin_ns());
    }

    std::vector<QRgb> p_colors(predicted.spans.size(), kUnmatched.rgba());
    std::vector<QRgb> m_colors(measured.spans.size(), kUnmatched.rgba());
    for (const auto& match : comparison_.matches) {
        const QRgb c = error_color(match.error).rgba();
        p_colors[static_cast<std::size_t>(match.predicted)] = c;
        m_colors[static_cast<std::size_t>(match.measured)] = c;
    }
    const std::vector<std::pair<QString, QColor>> legend = {{tr("measured 50 % faster"), error_color(-0.5)},
                                                            {tr("-20 %"), error_color(-0.2)},
                                                            {tr("as predicted"), error_color(0)},
                                                            {tr("+20 %"), error_color(0.2)},
                                                            {tr("50 % slower"), error_color(0.5)},
                                                            {tr("unmatched"), kUnmatched}};
    predicted_->set_span_colors(std::move(p_colors), legend);
    measured_->set_span_colors(std::move(m_colors), legend);
    // Tooltips say predicted against measured: a predicted span lists each measured match (one per rank).
    auto by_predicted = std::make_shared<std::vector<std::vector<std::size_t>>>(predicted.spans.size());
    auto by_measured = std::make_shared<std::vector<std::int32_t>>(measured.spans.size(), -1);
    for (std::size_t i = 0; i < comparison_.matches.size(); ++i) {
        (*by_predicted)[static_cast<std::size_t>(comparison_.matches[i].predicted)].push_back(i);
        (*by_measured)[static_cast<std::size_t>(comparison_.matches[i].measured)] = static_cast<std::int32_t>(i);
    }
    const auto note = [this](const SpanMatch& m) {
        const auto& p = predicted_->index()->model().spans[static_cast<std::size_t>(m.predicted)];
        const auto& s = measured_->index()->model().spans[static_cast<std::size_t>(m.measured)];
        return tr("\npredicted %1, measured %2 (%3)")
            .arg(format_duration(static_cast<double>(p.dur_ns)), format_duration(static_cast<double>(s.dur_ns)),
                 percent(m.error));
    };
    predicted_->set_tooltip_note([this, by_predicted, note](std::int32_t span) {
        QString out;
        for (std::size_t i : (*by_predicted)[static_cast<std::size_t>(span)]) out += note(comparison_.matches[i]);
        return out.isEmpty() ? tr("\nno measured match") : out;
    });
    measured_->set_tooltip_note([this, by_measured, note](std::int32_t span) {
        const std::int32_t i = (*by_measured)[static_cast<std::size_t>(span)];
        return i < 0 ? tr("\nno predicted match (in step %1)").arg(step_ + 1)
                     : note(comparison_.matches[static_cast<std::size_t>(i)]);
    });
    const double p_len = static_cast<double>(predicted_->index()->end_ns() - predicted_->index()->begin_ns());
    double m_len = static_cast<double>(measured_->index()->end_ns() - measured_->index()->begin_ns());
    if (steps_ > 1 && !comparison_.matches.empty()) {  // the compared step's extent, not the whole trace's
        double first = 1e300, last = -1e300;
        for (const auto& match : comparison_.matches) {
            const auto& span = measured.spans[static_cast<std::size_t>(match.measured)];
            first = std::min(first, static_cast<double>(span.start_ns));
            last = std::max(last, static_cast<double>(span.start_ns + span.dur_ns));
        }
        m_len = last - first;
    }

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
    totals_->setText(
        tr("Measured step %7 of %8: %1 spans matched by rank, track, name and order; %2 predicted "
           "and %3 measured unmatched. Trace length: predicted %4, measured %5 (%6).")
            .arg(comparison_.matches.size())
            .arg(comparison_.unmatched_predicted)
            .arg(comparison_.unmatched_measured)
            .arg(format_duration(p_len), format_duration(m_len), percent(p_len > 0 ? m_len / p_len - 1 : 0))
            .arg(step_ + 1)
            .arg(steps_));
}

}  // namespace dtsim::gui
