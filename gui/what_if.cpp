#include "dtsim/gui/what_if.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/gui/style.hpp"
#include "dtsim/gui/timeline_pane.hpp"
#include "dtsim/gui/trace_source.hpp"
#include "dtsim/sim/report.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"
#include "dtsim/sim/timeline.hpp"

#include <fmt/format.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace dtsim::gui {
namespace {

// The strategy knobs the panel offers, by their torch / DeepSpeed names. The
// rest stay as given on the command line.
constexpr std::array kPanelKnobs = {"bucket_cap_mb", "sharding_strategy", "reshard_after_forward", "stage"};

const std::array kPrecisions = {sim::Precision::fp32, sim::Precision::fp16_mixed, sim::Precision::bf16_mixed,
                                sim::Precision::fp16_true, sim::Precision::bf16_true};

QString qs(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

// "(was 398.1 ms, +3.6 %)", green when the change is an improvement.
QString versus(double now, double before, const QString& before_text, bool lower_is_better) {
    if (before == 0) return {};
    const double change = (now - before) / before * 100;
    if (std::fabs(change) < 0.05) return QStringLiteral("<br><span style='color:gray'>unchanged</span>");
    const bool better = lower_is_better ? now < before : now > before;
    return QStringLiteral("<br><span style='color:%1'>was %2 (%3%4 %)</span>")
        .arg(better ? QStringLiteral("#2e9d4a") : QStringLiteral("#d64541"), before_text,
             change > 0 ? QStringLiteral("+") : QString(), QString::number(change, 'f', 1));
}

}  // namespace

WhatIfOutcome simulate_what_if(const sim::Config& config, const calib::Calibration& calibration) {
    WhatIfOutcome o;
    try {
        config.validate();
        auto workload = std::make_shared<const models::Workload>(sim::build_workload(config));
        const sim::PhasedResult phased = sim::simulate_phases(workload, config, calibration);
        const sim::Metrics& m = phased.headline.metrics;
        o.valid = true;
        o.fits = m.fits;
        o.step_time_s = m.step_time_s;
        o.mfu = m.mfu;
        o.samples_per_s = m.samples_per_s;
        o.peak_memory_bytes = m.peak_memory_bytes;
        o.usable_memory_bytes = m.usable_memory_bytes;
        const sim::Timeline timeline = sim::make_timeline(phased.headline, config, calibration);
        o.title = QString::fromStdString(timeline.title);
        o.index = std::make_shared<TimelineIndex>(model_from_timeline(timeline));
        if (!m.fits)
            o.message = QStringLiteral("Does not fit: needs %1 per GPU, the %2 has %3 usable (over by %4). Try %5.")
                            .arg(format_bytes(static_cast<double>(m.peak_memory_bytes)),
                                 QString::fromStdString(calibration.device.name),
                                 format_bytes(static_cast<double>(m.usable_memory_bytes)),
                                 format_bytes(static_cast<double>(m.peak_memory_bytes - m.usable_memory_bytes)),
                                 QString::fromStdString(fmt::format(
                                     "{}", fmt::join(sim::memory_levers(phased.headline, config), ", or "))));
        else
            o.message = QStringLiteral("Fits: peak %1 of %2 usable per GPU (%3 %)")
                            .arg(format_bytes(static_cast<double>(m.peak_memory_bytes)),
                                 format_bytes(static_cast<double>(m.usable_memory_bytes)))
                            .arg(static_cast<double>(m.peak_memory_bytes) /
                                     static_cast<double>(std::max<std::int64_t>(1, m.usable_memory_bytes)) * 100,
                                 0, 'f', 0);
    } catch (const Error& e) {
        o.valid = false;
        o.message = QStringLiteral("Not a valid configuration: ") + QString::fromUtf8(e.what());
    }
    return o;
}

WhatIfPanel::WhatIfPanel(sim::Config config, calib::Calibration calibration, QWidget* parent)
    : QWidget(parent), config_(std::move(config)), calibration_(std::move(calibration)) {
    auto* split = new QSplitter(Qt::Horizontal, this);
    auto* outer = new QHBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    outer->addWidget(split);

    auto* side = new QWidget(split);
    side->setMinimumWidth(340);
    side->setMaximumWidth(460);
    auto* column = new QVBoxLayout(side);

    auto* config_box = new QGroupBox(tr("Configuration"), side);
    auto* form = new QFormLayout(config_box);
    form->addRow(tr("model"), new QLabel(QString::fromStdString(config_.model), config_box));
    form->addRow(tr("hardware"), new QLabel(QString::fromStdString(calibration_.name), config_box));
    strategy_ = new QComboBox(config_box);
    for (const auto& name : sim::strategies().names()) strategy_->addItem(QString::fromStdString(name));
    strategy_->setCurrentText(QString::fromStdString(config_.strategy));
    form->addRow(tr("strategy"), strategy_);
    micro_batch_ = new QSpinBox(config_box);
    micro_batch_->setRange(1, 4096);
    micro_batch_->setValue(static_cast<int>(config_.micro_batch));
    form->addRow(tr("micro-batch"), micro_batch_);
    nodes_ = new QSpinBox(config_box);
    nodes_->setRange(1, 4096);
    nodes_->setValue(config_.topology.nodes);
    nodes_->setSuffix(tr(" x %1 GPUs").arg(config_.topology.gpus_per_node));
    form->addRow(tr("nodes"), nodes_);
    precision_ = new QComboBox(config_box);
    for (auto p : kPrecisions) precision_->addItem(qs(sim::to_string(p)));
    precision_->setCurrentText(qs(sim::to_string(config_.precision)));
    form->addRow(tr("precision"), precision_);
    column->addWidget(config_box);

    auto* knob_box = new QGroupBox(tr("Strategy knobs"), side);
    knob_form_ = new QFormLayout(knob_box);
    column->addWidget(knob_box);

    auto* result_box = new QGroupBox(tr("Predicted step"), side);
    auto* results = new QFormLayout(result_box);
    step_time_ = new QLabel(result_box);
    throughput_ = new QLabel(result_box);
    mfu_ = new QLabel(result_box);
    peak_ = new QLabel(result_box);
    for (auto* l : {step_time_, throughput_, mfu_, peak_}) l->setTextFormat(Qt::RichText);
    results->addRow(tr("step time"), step_time_);
    results->addRow(tr("samples/s"), throughput_);
    results->addRow(tr("MFU"), mfu_);
    results->addRow(tr("peak memory"), peak_);
    column->addWidget(result_box);

    change_ = new QLabel(side);
    change_->setWordWrap(true);
    column->addWidget(change_);
    banner_ = new QLabel(side);
    banner_->setWordWrap(true);
    banner_->setMargin(8);
    column->addWidget(banner_);
    column->addStretch(1);

    timeline_ = new TimelinePane(split);
    split->addWidget(side);
    split->addWidget(timeline_);
    split->setStretchFactor(1, 1);

    connect(strategy_, &QComboBox::currentTextChanged, this, [this](const QString& s) {
        if (updating_) return;
        const QString before = QString::fromStdString(config_.strategy);
        config_.strategy = s.toStdString();
        config_.knobs.clear();  // another strategy's knobs would be refused
        build_knob_rows();
        resimulate(tr("strategy %1 \u2192 %2").arg(before, s));
    });
    connect(micro_batch_, &QSpinBox::valueChanged, this, [this](int v) {
        const auto before = config_.micro_batch;
        config_.micro_batch = v;
        resimulate(tr("micro-batch %1 \u2192 %2").arg(before).arg(v));
    });
    connect(nodes_, &QSpinBox::valueChanged, this, [this](int v) {
        const auto before = config_.topology.nodes;
        config_.topology.nodes = v;
        resimulate(tr("nodes %1 \u2192 %2").arg(before).arg(v));
    });
    connect(precision_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i < 0) return;
        const QString before = qs(sim::to_string(config_.precision));
        config_.precision = kPrecisions[static_cast<std::size_t>(i)];
        resimulate(tr("precision %1 \u2192 %2").arg(before, precision_->currentText()));
    });

    build_knob_rows();
    resimulate({});
}

std::string WhatIfPanel::knob_value(const std::string& name) const {
    for (const auto& [k, v] : config_.knobs)
        if (k == name) return v;
    for (const auto& spec : sim::strategies().find(config_.strategy).value.knobs)
        if (spec.name == name) return spec.default_value;
    return {};
}

void WhatIfPanel::set_knob(const std::string& name, const std::string& value) {
    const std::string before = knob_value(name);
    auto it = std::find_if(config_.knobs.begin(), config_.knobs.end(), [&](const auto& kv) { return kv.first == name; });
    if (it != config_.knobs.end())
        it->second = value;
    else
        config_.knobs.emplace_back(name, value);
    resimulate(QStringLiteral("%1 %2 \u2192 %3")
                   .arg(QString::fromStdString(name), QString::fromStdString(before), QString::fromStdString(value)));
}

void WhatIfPanel::build_knob_rows() {
    while (knob_form_->rowCount() > 0) knob_form_->removeRow(0);
    knob_controls_.clear();
    const auto* strategy = sim::strategies().find_or_null(config_.strategy);
    if (!strategy) return;
    for (const auto& spec : strategy->value.knobs) {
        if (std::find(kPanelKnobs.begin(), kPanelKnobs.end(), spec.name) == kPanelKnobs.end()) continue;
        const std::string name = spec.name;
        const QString current = QString::fromStdString(knob_value(name));
        QWidget* control = nullptr;
        if (spec.type == sim::KnobType::choice || name == "stage") {
            auto* box = new QComboBox(this);
            if (name == "stage")
                box->addItems({QStringLiteral("1"), QStringLiteral("2"), QStringLiteral("3")});
            else
                for (const auto& c : spec.choices) box->addItem(QString::fromStdString(c));
            box->setCurrentText(current);
            connect(box, &QComboBox::currentTextChanged, this,
                    [this, name](const QString& v) { set_knob(name, v.toStdString()); });
            control = box;
        } else if (spec.type == sim::KnobType::boolean) {
            auto* box = new QCheckBox(this);
            box->setChecked(current == QStringLiteral("true"));
            connect(box, &QCheckBox::toggled, this,
                    [this, name](bool on) { set_knob(name, on ? "true" : "false"); });
            control = box;
        } else {
            auto* box = new QDoubleSpinBox(this);
            box->setDecimals(1);
            box->setRange(std::max(spec.min_value, spec.min_exclusive ? 0.1 : spec.min_value), 1e6);
            box->setValue(current.toDouble());
            box->setKeyboardTracking(false);
            connect(box, &QDoubleSpinBox::valueChanged, this,
                    [this, name](double v) { set_knob(name, QString::number(v).toStdString()); });
            control = box;
        }
        control->setToolTip(QString::fromStdString(spec.description));
        knob_form_->addRow(QString::fromStdString(name), control);
        knob_controls_.emplace_back(QString::fromStdString(name), control);
    }
    if (knob_controls_.empty())
        knob_form_->addRow(new QLabel(tr("(none for this strategy; --set on the command line)"), this));
}

bool WhatIfPanel::set_control(const QString& name, const QString& value) {
    if (name == QStringLiteral("strategy")) {
        strategy_->setCurrentText(value);
        return strategy_->currentText() == value;
    }
    if (name == QStringLiteral("micro_batch")) {
        micro_batch_->setValue(value.toInt());
        return true;
    }
    if (name == QStringLiteral("nodes")) {
        nodes_->setValue(value.toInt());
        return true;
    }
    if (name == QStringLiteral("precision")) {
        precision_->setCurrentText(value);
        return precision_->currentText() == value;
    }
    for (const auto& [knob, control] : knob_controls_) {
        if (knob != name) continue;
        if (auto* box = qobject_cast<QComboBox*>(control)) box->setCurrentText(value);
        else if (auto* check = qobject_cast<QCheckBox*>(control)) check->setChecked(value == QStringLiteral("true"));
        else if (auto* spin = qobject_cast<QDoubleSpinBox*>(control)) spin->setValue(value.toDouble());
        return true;
    }
    return false;
}

QString WhatIfPanel::step_time_text() const { return step_time_->text(); }
QString WhatIfPanel::status_text() const { return banner_->text(); }

void WhatIfPanel::resimulate(const QString& change) {
    WhatIfOutcome next = simulate_what_if(config_, calibration_);
    if (outcome_.valid) previous_ = outcome_;
    outcome_ = std::move(next);
    show_outcome(change);
    emit simulated();
}

void WhatIfPanel::show_outcome(const QString& change) {
    const WhatIfOutcome& o = outcome_;
    change_->setText(change.isEmpty() ? QString() : tr("Changed: %1").arg(change));
    QString style = QStringLiteral("border-radius: 4px; color: white; background: %1;");
    if (!o.valid) {
        banner_->setStyleSheet(style.arg(QStringLiteral("#b03a2e")));
        banner_->setText(o.message);
        for (auto* l : {step_time_, throughput_, mfu_, peak_}) l->setText(QStringLiteral("\u2014"));
        return;
    }
    banner_->setStyleSheet(style.arg(o.fits ? QStringLiteral("#2e7d4a") : QStringLiteral("#c0392b")));
    banner_->setText(o.message);
    const WhatIfOutcome* before = previous_ ? &*previous_ : nullptr;
    const auto compare = [&](double now, double then, const QString& then_text, bool lower_is_better) {
        return before ? versus(now, then, then_text, lower_is_better) : QString();
    };
    step_time_->setText(format_duration(o.step_time_s * 1e9) +
                        compare(o.step_time_s, before ? before->step_time_s : 0,
                                before ? format_duration(before->step_time_s * 1e9) : QString(), true));
    throughput_->setText(QString::number(o.samples_per_s, 'f', 1) +
                         compare(o.samples_per_s, before ? before->samples_per_s : 0,
                                 before ? QString::number(before->samples_per_s, 'f', 1) : QString(), false));
    mfu_->setText(QString::number(o.mfu * 100, 'f', 1) + QStringLiteral(" %") +
                  compare(o.mfu, before ? before->mfu : 0,
                          before ? QString::number(before->mfu * 100, 'f', 1) + QStringLiteral(" %") : QString(),
                          false));
    peak_->setText(format_bytes(static_cast<double>(o.peak_memory_bytes)) +
                   compare(static_cast<double>(o.peak_memory_bytes),
                           before ? static_cast<double>(before->peak_memory_bytes) : 0,
                           before ? format_bytes(static_cast<double>(before->peak_memory_bytes)) : QString(), true));
    timeline_->set_title(o.title);
    timeline_->set_index(o.index);
}

}  // namespace dtsim::gui
