// TimelinePane: a TimelineView with its search box, hints and a details
// pane for the selected span.
#pragma once

#include "dtsim/gui/timeline_view.hpp"

#include <QWidget>

class QLabel;
class QLineEdit;
class QPlainTextEdit;

namespace dtsim::gui {

class TimelinePane : public QWidget {
    Q_OBJECT

public:
    explicit TimelinePane(QWidget* parent = nullptr);

    void set_index(std::shared_ptr<const TimelineIndex> index);
    void set_title(const QString& title);
    TimelineView* view() const { return view_; }
    QLineEdit* search_box() const { return search_; }
    QString details_text() const;
    // Steps through the search's matches (+1 next, -1 previous), as Enter,
    // Shift+Enter and the arrow buttons do.
    void step_match(int direction);
    QString match_text() const;  // "3 of 17", "no match" or empty

private:
    void show_details(std::int32_t span);
    void show_match_position();

    QLabel* title_ = nullptr;
    QLineEdit* search_ = nullptr;
    QLabel* matches_ = nullptr;
    TimelineView* view_ = nullptr;
    QPlainTextEdit* details_ = nullptr;
};

}  // namespace dtsim::gui
