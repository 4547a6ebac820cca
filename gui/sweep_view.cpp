#include "dtsim/gui/sweep_view.hpp"

#include "dtsim/advisor/ranking.hpp"
#include "dtsim/gui/style.hpp"
#include "dtsim/gui/timeline_pane.hpp"
#include "dtsim/gui/what_if.hpp"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace dtsim::gui {
namespace {

constexpr int kRowRole = Qt::UserRole + 1;   // the configuration's index in the results
constexpr int kSortRole = Qt::UserRole + 2;  // the number a column sorts by
constexpr int kFitsColumn = 7;

const QColor kFront(0xff, 0x7f, 0x0e);  // Tableau orange
const QColor kPoint(0x1f, 0x77, 0xb4);  // Tableau blue
const QColor kOver(0xd6, 0x45, 0x41);   // the usable-memory line

double gib_of(std::int64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(1 << 30);
}

// 1, 2 or 5 times a power of ten: about `ticks` steps over [0, max].
double nice_step(double max, int ticks) {
    const double raw = max / ticks;
    const double p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0})
        if (raw <= m * p) return m * p;
    return 10 * p;
}

QString tick_text(double v, double step) {
    return QString::number(v, 'f', step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step))));
}

// The table's filter: the text in any column, and optionally only what fits.
class RowFilter : public QSortFilterProxyModel {
public:
    using QSortFilterProxyModel::QSortFilterProxyModel;
    void set_fits_only(bool on) {
        fits_only_ = on;
        invalidateFilter();
    }

protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override {
        if (fits_only_ && !sourceModel()->index(row, kFitsColumn, parent).data(kSortRole).toBool()) return false;
        return QSortFilterProxyModel::filterAcceptsRow(row, parent);
    }

private:
    bool fits_only_ = false;
};

QStandardItem* number_item(double sort_value, const QString& text) {
    auto* item = new QStandardItem(text);
    item->setData(sort_value, kSortRole);
    item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

QStandardItem* text_item(const QString& text) {
    auto* item = new QStandardItem(text);
    item->setData(text, kSortRole);
    return item;
}

}  // namespace

// ---------------------------------------------------------------- scatter

SweepScatter::SweepScatter(QWidget* parent) : QWidget(parent) {
    setMinimumSize(320, 220);
    setMouseTracking(false);
}

void SweepScatter::set_results(const std::vector<advisor::SweepResult>* results, std::vector<std::size_t> pareto) {
    results_ = results;
    pareto_ = std::move(pareto);
    shown_.assign(results ? results->size() : 0, true);
    max_gib_ = max_rate_ = 0;
    if (results)
        for (const auto& r : *results) {
            if (!r.simulated) continue;
            max_gib_ = std::max({max_gib_, gib_of(r.peak_memory_bytes), gib_of(r.usable_memory_bytes)});
            max_rate_ = std::max(max_rate_, r.samples_per_s);
        }
    max_gib_ = max_gib_ > 0 ? max_gib_ * 1.05 : 1;
    max_rate_ = max_rate_ > 0 ? max_rate_ * 1.1 : 1;
    update();
}

void SweepScatter::set_selected(std::optional<std::size_t> row) {
    selected_ = row;
    update();
}

void SweepScatter::set_shown(std::vector<bool> shown) {
    shown_ = std::move(shown);
    update();
}

QRectF SweepScatter::plot_rect() const {
    const QFontMetrics fm(font());
    const double left = fm.horizontalAdvance(QStringLiteral("00000.0")) + 28;
    return QRectF(left, fm.height() + 14, std::max(10.0, width() - left - 16),
                  std::max(10.0, height() - 2.0 * fm.height() - 34));
}

QPointF SweepScatter::point_of(std::size_t row) const {
    const QRectF p = plot_rect();
    const auto& r = (*results_)[row];
    return {p.left() + gib_of(r.peak_memory_bytes) / max_gib_ * p.width(),
            p.bottom() - r.samples_per_s / max_rate_ * p.height()};
}

std::optional<std::size_t> SweepScatter::row_at(QPointF pos) const {
    if (!results_) return std::nullopt;
    std::optional<std::size_t> best;
    double best_d2 = 8.0 * 8.0 + 1e-9;
    for (std::size_t i = 0; i < results_->size(); ++i) {
        if (!(*results_)[i].simulated) continue;
        const QPointF d = point_of(i) - pos;
        const double d2 = d.x() * d.x() + d.y() * d.y();
        if (d2 < best_d2) {
            best_d2 = d2;
            best = i;
        }
    }
    return best;
}

void SweepScatter::mousePressEvent(QMouseEvent* event) {
    if (const auto row = row_at(event->position())) emit row_clicked(*row);
}

void SweepScatter::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    painter.setRenderHint(QPainter::Antialiasing);
    const QColor text = palette().color(QPalette::WindowText);
    QColor grid = text;
    grid.setAlpha(40);
    const QRectF p = plot_rect();
    const QFontMetrics fm(font());

    painter.setPen(text);
    const QString title = tr("Throughput against peak memory per GPU (orange: the Pareto front; hollow red: "
                             "does not fit)");
    painter.drawText(QRectF(p.left(), 2, p.width(), fm.height() + 6), Qt::AlignLeft | Qt::AlignVCenter,
                     fm.elidedText(title, Qt::ElideRight, static_cast<int>(p.width())));
    setToolTip(title);
    // Grid, ticks and axis labels.
    const double xs = nice_step(max_gib_, 6), ys = nice_step(max_rate_, 5);
    for (double x = 0; x <= max_gib_ + 1e-9; x += xs) {
        const double px = p.left() + x / max_gib_ * p.width();
        painter.setPen(grid);
        painter.drawLine(QPointF(px, p.top()), QPointF(px, p.bottom()));
        painter.setPen(text);
        painter.drawText(QRectF(px - 40, p.bottom() + 2, 80, fm.height()), Qt::AlignHCenter, tick_text(x, xs));
    }
    for (double y = 0; y <= max_rate_ + 1e-9; y += ys) {
        const double py = p.bottom() - y / max_rate_ * p.height();
        painter.setPen(grid);
        painter.drawLine(QPointF(p.left(), py), QPointF(p.right(), py));
        painter.setPen(text);
        painter.drawText(QRectF(0, py - fm.height() / 2.0, p.left() - 6, fm.height()), Qt::AlignRight,
                         tick_text(y, ys));
    }
    painter.drawText(QRectF(p.left(), p.bottom() + fm.height() + 4, p.width(), fm.height()), Qt::AlignHCenter,
                     tr("peak memory per GPU (GiB)"));
    painter.save();
    painter.translate(12, p.center().y());
    painter.rotate(-90);
    painter.drawText(QRectF(-p.height() / 2, -fm.height() / 2.0, p.height(), fm.height()), Qt::AlignHCenter,
                     tr("samples/s"));
    painter.restore();
    painter.setPen(QPen(text, 1));
    painter.drawRect(p);
    if (!results_) return;

    // The usable memory of the first simulated row (one hardware per sweep).
    const auto usable =
        std::find_if(results_->begin(), results_->end(), [](const advisor::SweepResult& r) { return r.simulated; });
    if (usable != results_->end() && usable->usable_memory_bytes > 0) {
        const double px = p.left() + gib_of(usable->usable_memory_bytes) / max_gib_ * p.width();
        painter.setPen(QPen(kOver, 1.5, Qt::DashLine));
        painter.drawLine(QPointF(px, p.top()), QPointF(px, p.bottom()));
        painter.drawText(QRectF(px - 206, p.top() + 2, 200, fm.height()), Qt::AlignRight,
                         tr("usable %1").arg(format_bytes(static_cast<double>(usable->usable_memory_bytes))));
    }

    // The front, joined in memory order.
    std::vector<std::size_t> front = pareto_;
    std::sort(front.begin(), front.end(), [&](std::size_t a, std::size_t b) {
        return (*results_)[a].peak_memory_bytes < (*results_)[b].peak_memory_bytes;
    });
    if (front.size() > 1) {
        QPainterPath path(point_of(front[0]));
        for (std::size_t i = 1; i < front.size(); ++i) path.lineTo(point_of(front[i]));
        painter.setPen(QPen(kFront, 2));
        painter.setBrush(Qt::NoBrush);
        painter.drawPath(path);
    }
    auto on_front = [&](std::size_t i) { return std::find(pareto_.begin(), pareto_.end(), i) != pareto_.end(); };
    for (std::size_t i = 0; i < results_->size(); ++i) {
        const auto& r = (*results_)[i];
        if (!r.simulated) continue;
        QColor c = on_front(i) ? kFront : r.fits ? kPoint : kOver;
        if (i < shown_.size() && !shown_[i]) c.setAlpha(50);
        const double radius = on_front(i) ? 5 : 4;
        painter.setPen(QPen(c, 1.5));
        painter.setBrush(r.fits ? QBrush(c) : Qt::NoBrush);
        painter.drawEllipse(point_of(i), radius, radius);
    }
    if (selected_ && *selected_ < results_->size() && (*results_)[*selected_].simulated) {
        painter.setPen(QPen(text, 2));
        painter.setBrush(Qt::NoBrush);
        painter.drawEllipse(point_of(*selected_), 9, 9);
    }
}

// ---------------------------------------------------------------- view

SweepView::SweepView(std::vector<advisor::SweepResult> results, calib::Calibration calibration, bool has_configs,
                     const QString& title, std::optional<std::size_t> recommended, QWidget* parent)
    : QWidget(parent),
      results_(std::move(results)),
      calibration_(std::move(calibration)),
      has_configs_(has_configs),
      recommended_(recommended) {
    const advisor::Ranking ranking = advisor::rank(results_, {});
    pareto_ = ranking.pareto;

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    auto* bar = new QHBoxLayout;
    auto* heading = new QLabel(title, this);
    QFont bold = heading->font();
    bold.setBold(true);
    heading->setFont(bold);
    filter_ = new QLineEdit(this);
    filter_->setPlaceholderText(tr("Filter rows (any column)"));
    filter_->setClearButtonEnabled(true);
    filter_->setMinimumWidth(220);
    filter_->setMaximumWidth(300);
    fits_only_ = new QCheckBox(tr("Fits only"), this);
    count_ = new QLabel(this);
    bar->addWidget(heading, 1);
    bar->addWidget(count_);
    bar->addWidget(fits_only_);
    bar->addWidget(filter_);
    layout->addLayout(bar);

    auto* vertical = new QSplitter(Qt::Vertical, this);
    auto* top = new QSplitter(Qt::Horizontal, vertical);
    table_ = new QTableView(top);
    scatter_ = new SweepScatter(top);
    top->addWidget(table_);
    top->addWidget(scatter_);
    top->setStretchFactor(0, 3);
    top->setStretchFactor(1, 2);

    auto* bottom = new QWidget(vertical);
    auto* bottom_layout = new QVBoxLayout(bottom);
    bottom_layout->setContentsMargins(0, 0, 0, 0);
    selection_ = new QLabel(bottom);
    selection_->setWordWrap(true);
    timeline_ = new TimelinePane(bottom);
    bottom_layout->addWidget(selection_);
    bottom_layout->addWidget(timeline_, 1);
    vertical->addWidget(top);
    vertical->addWidget(bottom);
    // The table and scatter get the larger share: a simulated step has few lanes.
    vertical->setStretchFactor(0, 3);
    vertical->setStretchFactor(1, 2);
    vertical->setSizes({600, 400});
    layout->addWidget(vertical, 1);

    build_table();
    scatter_->set_results(&results_, pareto_);
    refresh_shown();

    connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
        proxy_->setFilterFixedString(text);
        refresh_shown();
    });
    connect(fits_only_, &QCheckBox::toggled, this, [this](bool on) {
        static_cast<RowFilter*>(proxy_)->set_fits_only(on);
        refresh_shown();
    });
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                if (!current.isValid()) return;
                const auto row = static_cast<std::size_t>(proxy_->index(current.row(), 0).data(kRowRole).toULongLong());
                if (scatter_->selected() != row) show_row(row);
            });
    connect(scatter_, &SweepScatter::row_clicked, this, &SweepView::select_row);

    // Start on advise's recommendation, else the fastest that fits, else the first row.
    if (recommended_ && *recommended_ < results_.size())
        select_row(*recommended_);
    else if (!results_.empty())
        select_row(ranking.order.empty() ? 0 : ranking.order.front());
}

void SweepView::build_table() {
    model_ = new QStandardItemModel(this);
    model_->setHorizontalHeaderLabels({tr("#"), tr("configuration"), tr("step time"), tr("samples/s"), tr("MFU"),
                                       tr("exposed comm"), tr("peak memory"), tr("fits"), tr("Pareto"), tr("why")});
    for (std::size_t i = 0; i < results_.size(); ++i) {
        const auto& r = results_[i];
        const bool front = std::find(pareto_.begin(), pareto_.end(), i) != pareto_.end();
        QList<QStandardItem*> items;
        auto* label = text_item(QString::fromStdString(r.candidate.label()));
        label->setToolTip(label->text());
        items << number_item(static_cast<double>(r.candidate.index), QString::number(r.candidate.index)) << label;
        if (r.simulated) {
            items << number_item(r.step_time_s, format_duration(r.step_time_s * 1e9))
                  << number_item(r.samples_per_s, QString::number(r.samples_per_s, 'f', 1))
                  << number_item(r.mfu, QStringLiteral("%1 %").arg(r.mfu * 100, 0, 'f', 1))
                  << number_item(r.exposed_comm_s, format_duration(r.exposed_comm_s * 1e9))
                  << number_item(static_cast<double>(r.peak_memory_bytes),
                                 format_bytes(static_cast<double>(r.peak_memory_bytes)));
        } else {
            // Not simulated: sorts after every figure, whichever the direction is the useful one.
            for (double v : {1e300, -1.0, -1.0, 1e300, 1e300}) items << number_item(v, QStringLiteral("-"));
        }
        auto* fits = text_item(r.fits ? tr("yes") : tr("no"));
        fits->setData(r.fits, kSortRole);
        auto* pareto = text_item(front ? QStringLiteral("\u25cf") : QString());
        pareto->setData(front ? 1 : 0, kSortRole);
        pareto->setForeground(kFront);
        pareto->setTextAlignment(Qt::AlignCenter);
        items << fits << pareto << text_item(QString::fromStdString(r.why));
        items.front()->setData(static_cast<qulonglong>(i), kRowRole);
        for (auto* item : items) item->setEditable(false);
        model_->appendRow(items);
    }
    proxy_ = new RowFilter(this);
    proxy_->setSourceModel(model_);
    proxy_->setSortRole(kSortRole);
    proxy_->setFilterKeyColumn(-1);
    proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
    table_->setModel(proxy_);
    table_->setSortingEnabled(true);
    table_->sortByColumn(0, Qt::AscendingOrder);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->verticalHeader()->setVisible(false);
    table_->verticalHeader()->setDefaultSectionSize(QFontMetrics(font()).height() + 6);
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->resizeColumnsToContents();
    // Long labels (advise's knobs) must not push the figures out of sight; the tooltip has them whole.
    table_->setColumnWidth(1, std::min(table_->columnWidth(1), 320));
}

std::vector<std::size_t> SweepView::shown_rows() const {
    std::vector<std::size_t> out;
    for (int i = 0; i < proxy_->rowCount(); ++i)
        out.push_back(static_cast<std::size_t>(proxy_->index(i, 0).data(kRowRole).toULongLong()));
    return out;
}

void SweepView::refresh_shown() {
    std::vector<bool> shown(results_.size(), false);
    const auto rows = shown_rows();
    for (std::size_t i : rows) shown[i] = true;
    scatter_->set_shown(std::move(shown));
    count_->setText(tr("%1 of %2 configurations").arg(rows.size()).arg(results_.size()));
}

void SweepView::select_row(std::size_t row) {
    if (row >= results_.size()) return;
    show_row(row);
    for (int i = 0; i < proxy_->rowCount(); ++i)
        if (proxy_->index(i, 0).data(kRowRole).toULongLong() == row) {
            table_->selectRow(i);
            table_->scrollTo(proxy_->index(i, 0));
            return;
        }
}

QString SweepView::selection_text() const {
    return selection_->text();
}

void SweepView::show_row(std::size_t row) {
    scatter_->set_selected(row);
    const auto& r = results_[row];
    const QString label = (row == recommended_ ? tr("Recommended by dtsim advise: ") : QString()) +
                          QString::fromStdString(r.candidate.label());
    if (!r.simulated) {
        selection_->setText(tr("%1: not simulated: %2").arg(label, QString::fromStdString(r.why)));
        timeline_->set_index(nullptr);
        timeline_->set_title({});
        return;
    }
    QString text =
        tr("%1: step %2, %3 samples/s, MFU %4 %, peak %5 per GPU%6")
            .arg(label, format_duration(r.step_time_s * 1e9), QString::number(r.samples_per_s, 'f', 1))
            .arg(r.mfu * 100, 0, 'f', 1)
            .arg(format_bytes(static_cast<double>(r.peak_memory_bytes)), r.fits ? QString() : tr(" (does not fit)"));
    if (!has_configs_) {
        selection_->setText(text + tr(". To see its timeline, open the file with the options the sweep was run "
                                      "with: dtsim gui sweep.json --model ... --nodes ..."));
        timeline_->set_index(nullptr);
        timeline_->set_title({});
        return;
    }
    const WhatIfOutcome outcome = simulate_what_if(r.candidate.config, calibration_);
    if (!outcome.valid) {
        selection_->setText(text + QStringLiteral(". ") + outcome.message);
        timeline_->set_index(nullptr);
        return;
    }
    selection_->setText(text);
    timeline_->set_index(outcome.index);
    timeline_->set_title(outcome.title);
}

}  // namespace dtsim::gui
