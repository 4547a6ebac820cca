// SweepView: a sweep's configurations (`dtsim sweep` run in the window, or
// its --format json file) as a sortable, filterable table; a throughput
// against peak-memory scatter with the Pareto front marked; and the timeline
// of the selected configuration, simulated again when it is selected.
#pragma once

#include "dtsim/advisor/sweep.hpp"
#include "dtsim/profiler/calibration.hpp"

#include <QPointF>
#include <QRectF>
#include <QString>
#include <QWidget>

#include <optional>
#include <vector>

class QCheckBox;
class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;

namespace dtsim::gui {

class TimelinePane;

// One point per simulated configuration: x its peak memory per GPU, y its
// samples/s. The Pareto front (advisor::rank) is joined and drawn in orange,
// configurations that do not fit are hollow red, the usable memory is a dashed
// line, and rows the table's filter hides are drawn faint.
class SweepScatter : public QWidget {
    Q_OBJECT

public:
    explicit SweepScatter(QWidget* parent = nullptr);

    void set_results(const std::vector<advisor::SweepResult>* results, std::vector<std::size_t> pareto);
    void set_selected(std::optional<std::size_t> row);
    void set_shown(std::vector<bool> shown);  // per row: false draws it faint
    // The configuration drawn nearest `pos` within 8 px, if any.
    std::optional<std::size_t> row_at(QPointF pos) const;
    // Where a configuration's point is drawn, in widget coordinates.
    QPointF point_of(std::size_t row) const;
    std::optional<std::size_t> selected() const { return selected_; }

signals:
    void row_clicked(std::size_t row);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;

private:
    QRectF plot_rect() const;

    const std::vector<advisor::SweepResult>* results_ = nullptr;
    std::vector<std::size_t> pareto_;
    std::vector<bool> shown_;
    std::optional<std::size_t> selected_;
    double max_gib_ = 1, max_rate_ = 1;
};

class SweepView : public QWidget {
    Q_OBJECT

public:
    // `calibration` prices the rows again for their timelines; `has_configs`
    // says whether the rows carry their configurations (a sweep run here, or
    // a file read with its base configuration) or only their figures.
    // `recommended`: the row `dtsim advise` picked (its JSON), opened first
    // and named as such; without it the view opens on the fastest that fits.
    SweepView(std::vector<advisor::SweepResult> results, calib::Calibration calibration, bool has_configs,
              const QString& title, std::optional<std::size_t> recommended = std::nullopt, QWidget* parent = nullptr);

    const std::vector<advisor::SweepResult>& results() const { return results_; }
    const std::vector<std::size_t>& pareto() const { return pareto_; }
    QTableView* table() const { return table_; }
    QLineEdit* filter_box() const { return filter_; }
    QCheckBox* fits_only() const { return fits_only_; }
    SweepScatter* scatter() const { return scatter_; }
    TimelinePane* timeline() const { return timeline_; }
    // The rows the table shows now, in its order (indices into results()).
    std::vector<std::size_t> shown_rows() const;
    // Selects a configuration as a click on its row or point would.
    void select_row(std::size_t row);
    std::optional<std::size_t> selected_row() const { return scatter_->selected(); }
    // What the line above the timeline says about the selected configuration.
    QString selection_text() const;

private:
    void build_table();
    void refresh_shown();
    void show_row(std::size_t row);

    std::vector<advisor::SweepResult> results_;
    calib::Calibration calibration_;
    bool has_configs_ = false;
    std::optional<std::size_t> recommended_;
    std::vector<std::size_t> pareto_;
    QStandardItemModel* model_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QTableView* table_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QCheckBox* fits_only_ = nullptr;
    QLabel* count_ = nullptr;
    QLabel* selection_ = nullptr;
    SweepScatter* scatter_ = nullptr;
    TimelinePane* timeline_ = nullptr;
};

}  // namespace dtsim::gui
