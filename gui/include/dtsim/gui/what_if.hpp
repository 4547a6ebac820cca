// The live what-if: a configuration's knobs as controls; changing one
// re-simulates (well under a millisecond of simulation) and redraws the
// timeline, with step time, MFU and peak memory against the previous value.
#pragma once

#include "dtsim/gui/timeline_index.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/config.hpp"

#include <QString>
#include <QWidget>

#include <memory>
#include <optional>

class QComboBox;
class QFormLayout;
class QLabel;
class QSpinBox;

namespace dtsim::gui {

class TimelinePane;

// One simulation of a configuration, as the panel shows it.
struct WhatIfOutcome {
    bool valid = false;  // false: the configuration was refused; `message` says why
    bool fits = true;
    QString message;     // the refusal, or what does not fit and by how much
    double step_time_s = 0;
    double mfu = 0;
    double samples_per_s = 0;
    std::int64_t peak_memory_bytes = 0;
    std::int64_t usable_memory_bytes = 0;
    QString title;
    std::shared_ptr<const TimelineIndex> index;  // the predicted step
};

// Simulates `config` on `calibration`; user errors become an invalid outcome, not an exception.
WhatIfOutcome simulate_what_if(const sim::Config& config, const calib::Calibration& calibration);

class WhatIfPanel : public QWidget {
    Q_OBJECT

public:
    WhatIfPanel(sim::Config config, calib::Calibration calibration, QWidget* parent = nullptr);

    const sim::Config& config() const { return config_; }
    const WhatIfOutcome& outcome() const { return outcome_; }
    TimelinePane* timeline() const { return timeline_; }

    // Sets a control by name ("strategy", "micro_batch", "nodes", "precision"
    // or a strategy knob such as "bucket_cap_mb") as a user would; for tests
    // and scripted screenshots. False when there is no such control.
    bool set_control(const QString& name, const QString& value);
    QString step_time_text() const;
    QString status_text() const;

signals:
    void simulated();

private:
    void build_knob_rows();
    void apply_change(const QString& what, const QString& before, const QString& after);
    void set_knob(const std::string& name, const std::string& value);
    std::string knob_value(const std::string& name) const;
    void resimulate(const QString& change);
    void show_outcome(const QString& change);

    sim::Config config_;
    calib::Calibration calibration_;
    WhatIfOutcome outcome_;
    std::optional<WhatIfOutcome> previous_;

    QComboBox* strategy_ = nullptr;
    QSpinBox* micro_batch_ = nullptr;
    QSpinBox* nodes_ = nullptr;
    QComboBox* precision_ = nullptr;
    QFormLayout* knob_form_ = nullptr;
    std::vector<std::pair<QString, QWidget*>> knob_controls_;
    QLabel* banner_ = nullptr;
    QLabel* change_ = nullptr;
    QLabel* step_time_ = nullptr;
    QLabel* throughput_ = nullptr;
    QLabel* mfu_ = nullptr;
    QLabel* peak_ = nullptr;
    TimelinePane* timeline_ = nullptr;
    bool updating_ = false;
};

}  // namespace dtsim::gui
