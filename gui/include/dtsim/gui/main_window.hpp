// MainWindow: the tabs (timeline, what-if, compare, sweep), the File and View
// menus, drag and drop of trace files, and window state kept in QSettings.
#pragma once

#include "dtsim/gui/app.hpp"

#include <QMainWindow>

class QTabWidget;
class QMenu;

namespace dtsim::gui {

class CompareView;
class SweepView;
class TimelinePane;
class WhatIfPanel;

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(const GuiOptions& options, QWidget* parent = nullptr);

    // Shows the tab of that view ("timeline", "whatif", "compare", "sweep"); false when there is none.
    bool show_view(const QString& view);
    TimelinePane* timeline() const { return timeline_; }
    WhatIfPanel* what_if() const { return what_if_; }
    CompareView* compare() const { return compare_; }
    SweepView* sweep() const { return sweep_; }

    // Opens trace files in the timeline tab (and compares, when two traces are open).
    void open_files(const QStringList& paths);
    void save_state() const;
    // Shows [from_ms, to_ms] after the first event in every view.
    void show_window_ms(double from_ms, double to_ms);

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void closeEvent(QCloseEvent* event) override;

private:
    void build_menus();
    void refresh_recent_menu();

    const GuiOptions& options_;
    QTabWidget* tabs_ = nullptr;
    TimelinePane* timeline_ = nullptr;
    WhatIfPanel* what_if_ = nullptr;
    CompareView* compare_ = nullptr;
    SweepView* sweep_ = nullptr;
    QMenu* recent_ = nullptr;
};

}  // namespace dtsim::gui
