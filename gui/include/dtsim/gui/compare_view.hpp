// CompareView: a predicted and a measured trace one above the other on one
// time axis (zoom and pan move both), spans coloured by the duration error
// of their match, and the error per kind of span. A measured trace of
// several steps is compared one step at a time (a spin box picks which).
#pragma once

#include "dtsim/gui/compare.hpp"
#include "dtsim/gui/timeline_index.hpp"

#include <QColor>
#include <QWidget>

#include <memory>
#include <optional>

class QLabel;
class QSpinBox;
class QTableWidget;

namespace dtsim::gui {

class TimelineView;

// Blue when measured was faster than predicted, red when slower, grey when
// within a few percent; unmatched spans dark grey.
QColor error_color(double error);

class CompareView : public QWidget {
    Q_OBJECT

public:
    explicit CompareView(QWidget* parent = nullptr);

    void set_traces(std::shared_ptr<const TimelineIndex> predicted, std::shared_ptr<const TimelineIndex> measured,
                    const QString& predicted_name, const QString& measured_name);
    const Comparison& comparison() const { return comparison_; }
    // Fits the longer trace to the width; the other follows.
    void fit_all();
    TimelineView* predicted_view() const { return predicted_; }
    TimelineView* measured_view() const { return measured_; }
    QTableWidget* summary() const { return summary_; }
    // The measured step compared (0-based) and how many the trace holds.
    int measured_step() const { return step_; }
    int measured_steps() const { return steps_; }
    // Compares that measured step (clamped to the trace's) and shows it under the prediction.
    void set_measured_step(int step);
    QString totals_text() const;

private:
    void follow(TimelineView* from, TimelineView* to, double t0_ns, double ns_per_px);
    void compare_step();
    double origin_ns(const TimelineView* view) const;  // where each view's time axis starts

    std::optional<TraceMatcher> matcher_;  // keyed once per pair of traces
    Comparison comparison_;
    QLabel* predicted_label_ = nullptr;
    QLabel* measured_label_ = nullptr;
    TimelineView* predicted_ = nullptr;
    TimelineView* measured_ = nullptr;
    QTableWidget* summary_ = nullptr;
    QLabel* totals_ = nullptr;
    QLabel* step_label_ = nullptr;
    QSpinBox* step_box_ = nullptr;
    int step_ = 0, steps_ = 1;
    double measured_origin_ns_ = 0;  // the measured step's start, lined up with the predicted start
    bool following_ = false;
};

}  // namespace dtsim::gui
